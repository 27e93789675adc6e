"""The plugin's first minute as a new user meets it, in the real Claude Code CLIs (2.1.197 and
the latest): a fresh home, no `journal-agent` on PATH, a `python3` without the package or
torch. The MCP front answers at once; the first session's tools are listed while the plugin's
environment is prepared, a tool call in that session waits for it and works, the model's
Bash runs `journal-agent`; the environment is small, and the next session reuses it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.e2e.claude_helpers import (
    called,
    claude_clis,
    new_user_path,
    run_claude,
    texts,
    tool_results,
)

CLIS = claude_clis()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CLIS, reason="no Claude Code CLI (.ci/run installs two)"),
]
PREFIX = "mcp__plugin_journal-agent_journal__"
SEARCH, STATUS = PREFIX + "JournalSearch", PREFIX + "JournalAgentStatus"


@pytest.fixture(params=CLIS, ids=[version for version, _ in CLIS])
def cli(request) -> tuple[str, str]:
    """(version, path) of a Claude Code CLI."""
    return request.param


def _user_machine(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A fresh home and project, and a PATH whose `python3` is the base interpreter (no
    journal_agent, no torch) and which holds no `journal-agent` and no `uv`."""
    home, project = tmp_path / "home", tmp_path / "project"
    for d in (home, project):
        d.mkdir()
    env = {
        "PATH": new_user_path(tmp_path / "bin"),
        # Where a user's laptop reaches PyTorch's CPU index, this machine has the wheel on disk.
        "JOURNAL_AGENT_TORCH_INDEX": "/opt/wheels",
    }
    return home, Path(os.path.realpath(project)), env


def _envs(home: Path) -> list[Path]:
    return sorted((home / ".cache" / "journal-agent").glob("env-*"))


def test_the_front_connects_at_once_and_starts_nothing(cli, tmp_path, plugin_clone):
    """`claude mcp list` starts every server for its health check: ours answers before any
    environment exists, and a health check is no reason to prepare one."""
    _, binary = cli
    home, project, env = _user_machine(tmp_path)
    for args in (
        ["marketplace", "add", str(plugin_clone)],
        ["install", "journal-agent@journal-agent"],
    ):
        done = run_claude(
            ["plugin", *args], cwd=project, home=home, binary=binary, env=env, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
    listed = run_claude(["mcp", "list"], cwd=project, home=home, binary=binary, env=env)
    assert "bin/journal-agent mcp - ✔ Connected" in listed.stdout, listed.stdout
    assert _envs(home) == []
    assert not (home / ".claude" / "mcp-needs-auth-cache.json").exists()


OURS = [
    PREFIX + name
    for name in ("JournalAppend", "JournalSearch", "JournalCheck", "JournalInbox", "LedgerShow",
                 "LedgerUpdate", "MemoryEstimate", "MemoryTrace", "MemoryProfile", "DeviceInfo")
]  # fmt: skip


def _first_use_flow(body: dict[str, Any]) -> Any:
    """Ask the status while preparing, search the journal (it waits for the environment),
    run `journal-agent inbox --json` through Bash, then stop. On CLIs that defer MCP tools
    behind ToolSearch, load ours first, and once ready ask for all of ours and the status
    tool again (what the CLI offers now)."""
    offered = [t["name"] for t in body.get("tools", [])]
    done = called(body)
    if "Bash" not in offered:
        return reply("Side request.")
    if SEARCH not in offered and "ToolSearch" in offered and "ToolSearch" not in done:
        return reply(tool_use("ToolSearch", {"query": "select:" + ",".join([STATUS, SEARCH])}))
    if STATUS not in done and STATUS in offered:
        return reply(tool_use(STATUS, {}))
    if SEARCH not in done and SEARCH in offered:
        return reply(tool_use(SEARCH, {"query": "ZeRO stage 2"}))
    if "Bash" not in done:
        return reply(tool_use("Bash", {"command": "journal-agent inbox --json"}))
    if "ToolSearch" in offered and done.count("ToolSearch") == 1:
        return reply(tool_use("ToolSearch", {"query": "select:" + ",".join([*OURS, STATUS])}))
    if "ToolSearch" in offered and done.count(STATUS) == 1:
        return reply(tool_use(STATUS, {}))
    return reply("Done.")


def _session(binary, home, project, env, flow, *, plugin: Path) -> tuple[dict, list, float]:
    """Run one `claude -p` session; its result, its requests, and the seconds from its start to
    the first request of the main conversation."""
    began, first = time.monotonic(), []

    def timed(body: dict[str, Any]) -> Any:
        if not first and "Bash" in [t["name"] for t in body.get("tools", [])]:
            first.append(time.monotonic() - began)
        return flow(body)

    model = ScriptedModel([timed] * 60)
    with model.serve() as url:
        done = run_claude(
            [
                *("-p", "Find what my journal says about ZeRO.", "--output-format", "json"),
                *("--plugin-dir", str(plugin), "--allowedTools", f"{PREFIX}*,Bash"),
            ],
            cwd=project,
            home=home,
            base_url=url,
            binary=binary,
            env=env,
            timeout=900,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout), list(model.requests), first[0]


def _mentions(request, name: str) -> bool:
    """Whether ``name`` is offered in the request: as a tool, or named among the deferred ones."""
    return name in json.dumps(request.body)


def test_first_use_tools_listed_while_preparing_and_working_once_ready(cli, tmp_path, plugin_clone):
    _, binary = cli
    home, project, env = _user_machine(tmp_path)
    # What the plugin's earlier design left: a venv in Claude Code's data folder of the plugin.
    old = home / ".claude" / "plugins" / "data" / "journal-agent-inline" / "venv"
    subprocess.run(
        [env["PATH"].split(os.pathsep)[0] + "/python3", "-m", "venv", "--without-pip", old],
        check=True,
    )
    result, requests, first = _session(
        binary, home, project, env, _first_use_flow, plugin=plugin_clone
    )
    main = [r for r in requests if "Bash" in [t["name"] for t in r.body.get("tools", [])]]
    assert result["result"] == "Done.", result

    # The first request, within 60 s of the start, already offers our tools, and the status
    # tool while preparing (2.1.332: named among the deferred tools, for ToolSearch).
    assert first < 60, first
    assert all(_mentions(main[0], name) for name in [*OURS, STATUS])
    first_status = next(r for r in main if STATUS in tool_results(r))
    status = tool_results(first_status)[STATUS]
    assert "preparing its environment" in status or "ready" in status
    results = tool_results(main[-1])
    # The search waited for the environment and ran in this same session.
    assert results[SEARCH].startswith("No entries") or "learning_journal.md" in results[SEARCH]
    # The model's Bash found journal-agent (the plugin's bin/ on its PATH).
    assert results["Bash"].strip() == "[]"
    # Once ready, the front said list_changed and Claude Code listed the tools again: the full
    # tools and no status tool.
    if "ToolSearch" in [t["name"] for t in main[-1].body["tools"]]:
        # 2.1.332 tells the model the status tool is gone, ToolSearch finds all of ours but
        # not it, and it refuses a call of it (its schema stays in `tools` only because the
        # conversation holds a reference to it, which the API needs defined).
        gone = "The following deferred tools are no longer available"
        notice = next(t for t in texts(main[-1]) if gone in t)
        assert STATUS in notice and not any(name in notice for name in OURS)
        loaded = _tool_references(main[-1])
        assert sorted(loaded[-1]) == sorted(OURS)
        assert "No such tool available" in tool_results(main[-1])[STATUS]
    else:
        # 2.1.197 sends every tool with each request: ours, and no status tool any more.
        offered = [t["name"] for t in main[-1].body["tools"] if t["name"].startswith(PREFIX)]
        assert sorted(offered) == sorted(OURS)
        # What all of ours cost in every request, as this CLI sends them (cl100k).
        ours = [t for t in main[-1].body["tools"] if t["name"].startswith(PREFIX)]
        assert _tokens(ours) < 2500
        assert _tokens([t for t in main[0].body["tools"] if t["name"].startswith(PREFIX)]) < 2500

    [envdir] = _envs(home)
    state = json.loads((envdir / "state.json").read_text())
    assert state["phase"] == "ready" and state["installer"] == "pip"
    size = _du(envdir)
    assert size < 1.5e9, size
    assert not old.exists()  # removed once the new one was ready

    # A second --plugin-dir session reuses it: nothing prepared again.
    log = (envdir / "prepare.log").read_text()
    _session(binary, home, project, env, _first_use_flow, plugin=plugin_clone)
    assert _envs(home) == [envdir] and (envdir / "prepare.log").read_text() == log


def _tokens(tools: list[dict[str, Any]]) -> int:
    from journal_agent.tokenizer import encoding

    return len(encoding().encode(json.dumps(tools, ensure_ascii=False)))


def _tool_references(request) -> list[list[str]]:
    """The tools each ToolSearch result of the conversation loaded, in order."""
    found = []
    for message in request.body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                names = [
                    c["tool_name"] for c in block["content"] if c.get("type") == "tool_reference"
                ]
                if names:
                    found.append(names)
    return found


def _du(folder: Path) -> int:
    done = subprocess.run(["du", "-sb", str(folder)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])
