"""Start-up time of commands that call neither a model nor torch, against `python -c pass`.

Both are measured side by side in this run (interleaved, same machine state), so the result is
the CLI's own overhead. Prints JSON: median wall time and median CPU time (user + system, which a
busy machine inflates less than wall time) of each. Target: every command under 0.2 s (median
wall time) on an idle machine.

    python benchmarks/bench_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
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
    ["tool", "--help"],
    ["run", "--help"],
]
TARGET_S = 0.2


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "learning_journal.md").write_text(
            "# Learning Journal\n\n---\n\n## ZeRO Stage 2 (2026-11-20)\n\n"
            "**Context**: Reading the DeepSpeed config.\n",
            encoding="utf-8",
        )
        baseline: list[tuple[float, float]] = []
        samples: dict[str, list[tuple[float, float]]] = {" ".join(c): [] for c in COMMANDS}
        for _ in range(opts.repeats):
            baseline.append(_time([sys.executable, "-c", "pass"], cwd))
            for cmd in COMMANDS:
                samples[" ".join(cmd)].append(
                    _time([sys.executable, "-m", "journal_agent", *cmd], cwd)
                )
        base = statistics.median(w for w, _ in baseline)
        base_cpu = statistics.median(c for _, c in baseline)
        results = []
        for cmd in COMMANDS:
            key = " ".join(cmd)
            walls = [w for w, _ in samples[key]]
            med = statistics.median(walls)
            cpu = statistics.median(c for _, c in samples[key])
            results.append(
                {
                    "command": f"journal-agent {key}",
                    "median_s": round(med, 4),
                    "min_s": round(min(walls), 4),
                    "cpu_median_s": round(cpu, 4),
                    "overhead_vs_python_s": round(med - base, 4),
                    "cpu_overhead_vs_python_s": round(cpu - base_cpu, 4),
                    "heavy_imports": _heavy_imports(cmd, cwd),
                    "meets_target": med < TARGET_S,
                }
            )
    print(
        json.dumps(
            {
                "benchmark": "startup",
                "repeats": opts.repeats,
                "python_c_pass_median_s": round(base, 4),
                "python_c_pass_cpu_median_s": round(base_cpu, 4),
                "target_s": TARGET_S,
                "commands": results,
                "all_meet_target": all(
                    r["meets_target"] and not r["heavy_imports"] for r in results
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
