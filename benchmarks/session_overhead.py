"""What the plugin adds to a headless session: ``claude -p hi`` with ``--plugin-dir`` (our MCP
front and the four hooks a session runs) against the same session without the plugin, in each
Claude Code CLI at hand (2.1.197 in .ci/node, the latest in .ci/node-latest, one on PATH),
against the scripted Anthropic-compatible server the e2e tests use. Used by bench_hooks.py
(``--sessions``, ``--attribute``).

Robust on a shared machine: every round runs each side once, in an order shuffled per round
(seeded), so that all sides see the same load and none always follows another; the first
round warms the caches and is dropped. Reported per side: the median and the spread (p25,
p75, min, max) of the wall time and of the CPU time (user + system of ``claude`` and of every
process it waited for: the hooks, the MCP front; what the load does not inflate). The
overhead is the median of the per-round differences (with − without, the two from the same
round) beside the difference of the medians, with the load average before and after.
Target: at most +0.3 s of wall time.

``attribute``: where the overhead goes. Beside the two, plugin copies that each hold one part:
none (Claude Code's handling of a plugin's agents, commands and output style), our MCP front
alone, and each hook event a ``-p hi`` session runs alone — as ours, and as a hook that starts
no Python (``/bin/sh -c 'exit 0'``): Claude Code's own cost of running a hook at that event.

The plugin's environment is in the state a preparation leaves it (``state.json`` ready, its
``venv/bin/python`` running this interpreter, checked once as a session start checks it): a
session start only reads that state, and ``-p hi`` calls no tool. The ``PATH`` is a new user's:
a ``python3`` without the package, no ``journal-agent``.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.e2e.claude_helpers import (  # noqa: E402 (the repository on the path first)
    claude_clis,
    claude_env,
    exec_shim,
    new_user_path,
    ready_plugin_env,
)

TARGET_S = 0.3
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")  # what `-p hi` runs
PLUGIN_FILES = (".claude-plugin", "agents", "commands", "output-styles", "bin", "journal_agent")


def _part(folder: Path, *, mcp: bool, hooks: dict[str, list] | None) -> Path:
    """A copy of the plugin (links to this checkout's files) with our MCP server or not, and
    ``hooks`` as its hooks.json's ``hooks``."""
    folder.mkdir(parents=True)
    for name in (*PLUGIN_FILES, "pyproject.toml"):
        (folder / name).symlink_to(REPO / name)
    (folder / "hooks").mkdir()
    for name in ("capture.sh", "capture.py"):
        (folder / "hooks" / name).symlink_to(REPO / "hooks" / name)
    if hooks is not None:
        (folder / "hooks" / "hooks.json").write_text(json.dumps({"hooks": hooks}))
    if mcp:
        shutil.copy(REPO / ".mcp.json", folder / ".mcp.json")
    return folder


def _noop(entries: list[dict]) -> list[dict]:
    """The same registrations, each starting ``/bin/sh -c 'exit 0'`` instead of our hook."""
    out = json.loads(json.dumps(entries))
    for entry in out:
        for hook in entry["hooks"]:
            hook["command"], hook["args"] = "/bin/sh", ["-c", "exit 0"]
    return out


def plugins(tmp: Path, attribute: bool) -> dict[str, Path | None]:
    """Side name → the ``--plugin-dir`` of that side (None: no plugin)."""
    sides: dict[str, Path | None] = {"without": None, "with": REPO}
    if not attribute:
        return sides
    ours = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    sides["plugin, no hooks or MCP"] = _part(tmp / "none", mcp=False, hooks=None)
    sides["MCP front alone"] = _part(tmp / "mcp", mcp=True, hooks=None)
    for event in EVENTS:
        sides[f"{event} alone"] = _part(tmp / event, mcp=False, hooks={event: ours[event]})
        sides[f"{event} no-op"] = _part(
            tmp / f"{event}-noop", mcp=False, hooks={event: _noop(ours[event])}
        )
    return sides


def _session(binary: str, environ: dict[str, str], project: Path, plugin: Path | None):
    """Wall seconds of one ``claude -p hi``, and the CPU seconds (user + system) of it and of
    every process it waited for."""
    args = [binary, "-p", "hi", "--output-format", "json"]
    args += ["--plugin-dir", str(plugin)] if plugin else []
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


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles and range, in seconds to the millisecond."""
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {
        "median": round(statistics.median(values), 3),
        "p25": round(q[0], 3),
        "p75": round(q[2], 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def _rounds(runs: int, sides: dict[str, Path | None], session) -> dict[str, dict[str, list]]:
    """``runs`` rounds (after one dropped), each side once per round in a shuffled order."""
    order = random.Random(0)
    walls: dict[str, list[float]] = {side: [] for side in sides}
    cpus: dict[str, list[float]] = {side: [] for side in sides}
    for i in range(runs + 1):
        names = list(sides)
        order.shuffle(names)
        for side in names:
            wall, cpu = session(sides[side])
            if i:
                walls[side].append(wall)
                cpus[side].append(cpu)
    return {"wall": walls, "cpu": cpus}


def summary(measured: dict[str, dict[str, list]]) -> dict[str, object]:
    """Per side: its spread; beside ``without``: the paired overhead (per-round differences)."""
    walls, cpus = measured["wall"], measured["cpu"]
    out: dict[str, object] = {}
    for side in walls:
        entry: dict[str, object] = {"wall_s": spread(walls[side]), "cpu_s": spread(cpus[side])}
        if side != "without":
            paired = [a - b for a, b in zip(walls[side], walls["without"], strict=True)]
            paired_cpu = [a - b for a, b in zip(cpus[side], cpus["without"], strict=True)]
            entry["overhead_wall_s"] = spread(paired)
            entry["overhead_cpu_s"] = spread(paired_cpu)
            entry["overhead_of_medians_s"] = round(
                statistics.median(walls[side]) - statistics.median(walls["without"]), 3
            )
        out[side] = entry
    return out


def measure(runs: int, attribute: bool = False) -> dict[str, object]:
    """Per CLI: each side's spread and the overhead of the plugin (and of each of its parts)."""
    from journal_agent.testing import ScriptedModel, reply

    found = claude_clis()
    if not found:
        return {"skipped": "no Claude Code CLI (.ci/run installs two)"}
    out: dict[str, object] = {"runs": runs, "target_s": TARGET_S, "cpus": os.cpu_count()}
    out["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-session-", ignore_cleanup_errors=True) as name:
        tmp = Path(name)
        sides = plugins(tmp / "plugins", attribute)
        # (a session may send a side request beside its turn: room for a few per session)
        model = ScriptedModel(
            [lambda body: reply("Hello.")] * (len(found) * (runs + 1) * len(sides) * 8)
        )
        python = exec_shim(tmp / "usr-bin" / "python3", sys.executable)
        for plugin in filter(None, sides.values()):
            ready_plugin_env(tmp / "envs", python, plugin)
        with model.serve() as url:
            out |= _each_cli(found, runs, sides, tmp, url)
        prepared = list((tmp / "envs").glob("env-*/prepare.log"))
    # No session started a preparation (it would have measured a rebuild running beside the
    # sessions: a fake environment that did not run the package did, and cost seconds).
    out["preparations_started"] = len(prepared)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def _each_cli(found, runs, sides, tmp: Path, url: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for version, binary in found:
        per = tmp / version
        (per / "home").mkdir(parents=True)
        (per / "project").mkdir()
        environ = claude_env(per / "home", url) | {
            "PATH": new_user_path(tmp / "bin"),
            "JOURNAL_AGENT_ENVS": str(tmp / "envs"),
        }

        def session(plugin, binary=binary, environ=environ, project=per / "project"):
            return _session(binary, environ, project, plugin)

        result = summary(_rounds(runs, sides, session))
        overhead = result["with"]["overhead_wall_s"]["median"]  # type: ignore[index]
        result["overhead_s"] = overhead
        result["meets_target"] = overhead <= TARGET_S
        out[version] = result
    return out


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 8), indent=2))
