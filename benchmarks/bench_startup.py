"""Start-up time of the light commands (no model, no torch), against `python -c pass`.

Both are run side by side in this run (interleaved, same machine state), and each command is
reported as its own time minus `python -c pass`'s: the CLI's own overhead, the interpreter's
start-up taken out. CPU time (user + system of the child) and wall time, medians.

The floor it checks: every light command's median CPU time minus `python -c pass`'s median CPU
time is under 0.2 s, and none imports a heavy module (anthropic, torch, mcp, matplotlib).
CPU time, because wall time on a loaded machine measures the load (5-10x the CPU time on the
shared 2-core machine); the wall times are printed beside it, with the load average, and on an
idle machine they are close to the CPU times. Exits 1 when a command misses the floor.

    python benchmarks/bench_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("anthropic", "torch", "mcp", "matplotlib")
COMMANDS = [
    ["--help"],
    ["agents", "--json"],
    ["commands", "--json"],
    ["journal", "--help"],
    ["journal", "list"],
    ["estimate", "--help"],
    ["trace", "--help"],
    ["fit", "--help"],
    ["tool", "--help"],
    ["run", "--help"],
]
FLOOR_S = 0.2
FLOOR = (
    "median CPU time (user + system) minus python -c pass's, measured in the same run, "
    f"under {FLOOR_S} s for every command, and no heavy import"
)


def _time(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def _heavy_imports(args: list[str], cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "journal_agent", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    loaded = {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return sorted(loaded & set(HEAVY))


def _measure(repeats: int, cwd: Path) -> tuple[list[tuple[float, float]], dict[str, list]]:
    baseline: list[tuple[float, float]] = []
    samples: dict[str, list[tuple[float, float]]] = {" ".join(c): [] for c in COMMANDS}
    for _ in range(repeats):
        baseline.append(_time([sys.executable, "-c", "pass"], cwd))
        for cmd in COMMANDS:
            samples[" ".join(cmd)].append(_time([sys.executable, "-m", "journal_agent", *cmd], cwd))
    return baseline, samples


def _row(cmd: list[str], runs: list[tuple[float, float]], base: tuple[float, float], cwd: Path):
    wall = statistics.median(w for w, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    heavy = _heavy_imports(cmd, cwd)
    return {
        "command": "journal-agent " + " ".join(cmd),
        "cpu_s": round(cpu, 4),
        "cpu_minus_python_s": round(cpu - base[1], 4),
        "wall_s": round(wall, 4),
        "wall_minus_python_s": round(wall - base[0], 4),
        "wall_min_s": round(min(w for w, _ in runs), 4),
        "heavy_imports": heavy,
        "meets_floor": cpu - base[1] < FLOOR_S and not heavy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    opts = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "learning_journal.md").write_text(
            "# Learning Journal\n\n---\n\n## ZeRO Stage 2 (2026-11-20)\n\n"
            "**Context**: Reading the DeepSpeed config.\n",
            encoding="utf-8",
        )
        baseline, samples = _measure(opts.repeats, cwd)
        base = (
            statistics.median(w for w, _ in baseline),
            statistics.median(c for _, c in baseline),
        )
        rows = [_row(cmd, samples[" ".join(cmd)], base, cwd) for cmd in COMMANDS]
    result = {
        "benchmark": "startup",
        "floor": FLOOR,
        "floor_s": FLOOR_S,
        "repeats": opts.repeats,
        "cpus": os.cpu_count(),
        "load_average_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "python_c_pass": {"cpu_s": round(base[1], 4), "wall_s": round(base[0], 4)},
        "commands": rows,
        "all_meet_floor": all(r["meets_floor"] for r in rows),
    }
    print(json.dumps(result, indent=2))
    sys.exit(0 if result["all_meet_floor"] else 1)


if __name__ == "__main__":
    main()
