"""What the plugin adds to a headless session: ``claude -p hi`` with and without
``--plugin-dir`` (our MCP front and the four hooks a session runs), in each Claude Code CLI at
hand (2.1.197 in .ci/node, the latest in .ci/node-latest, one on PATH), against the scripted
Anthropic-compatible server the e2e tests use. The two runs alternate, so both see the same
machine load; the median of ``runs`` of each, side by side, on wall time and on CPU time (of
``claude`` and every process it waited for: on a shared machine wall time is mostly the queue
for a core). Target: at most +0.3 s.

The plugin's environment is in the state a preparation leaves it (``state.json`` ready, its
``venv/bin`` pointing at this interpreter): a session start only reads that state, and ``-p hi``
calls no tool. The ``PATH`` is a new user's: a ``python3`` without the package, no
``journal-agent``. Used by bench_hooks.py (``--sessions``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.3


def clis() -> list[tuple[str, str]]:
    """(version, path) of each Claude Code CLI here, oldest first."""
    found: dict[str, str] = {}
    candidates = [shutil.which("claude")] + [
        str(REPO / ".ci" / d / "node_modules" / ".bin" / "claude") for d in ("node", "node-latest")
    ]
    for path in candidates:
        if not path or not os.access(path, os.X_OK):
            continue
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        version = done.stdout.split(" ")[0].strip()
        if done.returncode == 0 and version:
            found.setdefault(version, path)
    return sorted(found.items())


def _ready_env(envs: Path) -> None:
    """The plugin's environment as a preparation leaves it, its interpreter this one."""
    sys.path.insert(0, str(REPO))
    from journal_agent.plugin_env.env import deps_stamp, locate

    os.environ["JOURNAL_AGENT_ENVS"] = str(envs)
    try:
        env = locate(str(REPO))
    finally:
        del os.environ["JOURNAL_AGENT_ENVS"]
    home = Path(env.home)
    (home / "venv" / "bin").mkdir(parents=True)
    bin_dir = Path(sys.executable).parent
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    (home / "venv" / "bin" / "journal-agent").symlink_to(bin_dir / "journal-agent")
    state = {"phase": "ready", "deps": deps_stamp(str(REPO)), "python": sys.executable}
    (home / "state.json").write_text(json.dumps(state))
    (home / "root.txt").write_text(str(REPO) + "\n")


def _environ(tmp: Path, base_url: str) -> dict[str, str]:
    folder = tmp / "bin"
    folder.mkdir(exist_ok=True)
    python = folder / "python3"
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        python.write_text(f'#!/bin/sh\nexec "{base}" "$@"\n')
        python.chmod(0o755)
    return {
        "HOME": str(tmp / "home"),
        "PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-scripted-0000",
        "JOURNAL_AGENT_ENVS": str(tmp / "envs"),
    }


def _session(
    binary: str, environ: dict[str, str], project: Path, plugin: bool
) -> tuple[float, float]:
    """Wall seconds of one ``claude -p hi``, and the CPU seconds (user + system) of it and of
    every process it waited for (the hooks, the MCP server): what the load does not inflate."""
    args = [binary, "-p", "hi", "--output-format", "json"]
    args += ["--plugin-dir", str(REPO)] if plugin else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        args, cwd=project, env=environ, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or json.loads(done.stdout).get("result") != "Hello.":
        raise RuntimeError(f"claude -p hi failed: {done.stdout[-400:]} {done.stderr[-400:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu


def measure(runs: int) -> dict[str, object]:
    """Per CLI: the median seconds of ``claude -p hi`` without and with the plugin."""
    from journal_agent.testing import ScriptedModel, reply

    found = clis()
    if not found:
        return {"skipped": "no Claude Code CLI (.ci/run installs two)"}
    out: dict[str, object] = {"runs": runs, "target_s": TARGET_S}
    model = ScriptedModel([lambda body: reply("Hello.")] * (len(found) * (runs + 1) * 2 * 8))
    with tempfile.TemporaryDirectory(prefix="bench-session-") as name, model.serve() as url:
        tmp = Path(name)
        _ready_env(tmp / "envs")
        for version, binary in found:
            per = tmp / version
            (per / "home").mkdir(parents=True)
            (per / "project").mkdir()
            environ = _environ(tmp, url) | {"HOME": str(per / "home")}
            times: dict[str, list[float]] = {"without": [], "with": []}
            cpus: dict[str, list[float]] = {"without": [], "with": []}
            for i in range(runs + 1):  # the first of each warms the caches, and is dropped
                for side in ("without", "with"):
                    took, cpu = _session(binary, environ, per / "project", side == "with")
                    if i:
                        times[side].append(took)
                        cpus[side].append(cpu)
            without, with_ = (statistics.median(times[s]) for s in ("without", "with"))
            cpu_without, cpu_with = (statistics.median(cpus[s]) for s in ("without", "with"))
            out[version] = {
                "without_plugin_s": round(without, 3),
                "with_plugin_s": round(with_, 3),
                "overhead_s": round(with_ - without, 3),
                "meets_target": with_ - without <= TARGET_S,
                "cpu_without_plugin_s": round(cpu_without, 3),
                "cpu_with_plugin_s": round(cpu_with, 3),
                "cpu_overhead_s": round(cpu_with - cpu_without, 3),
                "all_s": {side: [round(t, 3) for t in ts] for side, ts in times.items()},
            }
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 8), indent=2))
