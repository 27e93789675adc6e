"""The journal speaks when its code is touched (#33), inside the real Claude Code CLI (2.1.197
and the latest), offline: a Read of cited lines puts the entry's line into the model's next
request, an edit that changes them says so, and our own agent starts with what the journal
has on the file it was handed — the sub-agent's requests only, never the main thread's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from journal_agent.capture import read_inbox
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.e2e.claude_helpers import REPO, claude_clis, run_claude
from tests.entries import render_entry

CLIS = claude_clis()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CLIS, reason="no Claude Code CLI (.ci/run installs two)"),
]
ENTRY_ID = "y-sets-the-second-step-2026-11-20"


@pytest.fixture(params=CLIS, ids=[version for version, _ in CLIS])
def cli_binary(request) -> str:
    return request.param[1]


@pytest.fixture
def project(tmp_path: Path, cli) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    entry = render_entry(
        "Y Sets The Second Step", "2026-11-20", context="Tuning a.py.", question="What does y do?",
        intuition="y sets the schedule's second step (a.py:2).", tags="#schedule",
    )  # fmt: skip
    assert cli("journal", "append", "-", "--root", str(root), input=entry).returncode == 0
    return root


def _session(binary: str, project: Path, flow, prompt: str) -> list:
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    model = ScriptedModel([flow] * 40)
    with model.serve() as url:
        done = run_claude(
            [
                *("-p", prompt, "--plugin-dir", str(REPO), "--output-format", "json"),
                *("--permission-mode", "acceptEdits"),
            ],
            cwd=project, home=home, base_url=url, binary=binary, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    log = project / ".journal" / "hooks.log"
    assert not log.exists(), log.read_text(errors="replace")
    return list(model.requests)


def _sent(request) -> str:
    return json.dumps(request.body.get("messages", []), ensure_ascii=False) + json.dumps(
        request.body.get("system", ""), ensure_ascii=False
    )


def test_a_read_and_an_edit_of_cited_lines_reach_the_model(cli_binary, project):
    path = str(project / "a.py")

    def flow(body: dict[str, Any]) -> Any:
        if "Edit" not in [t["name"] for t in body.get("tools", [])]:
            return reply("Side request.")
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turns == 0:
            return reply(tool_use("Read", {"file_path": path}))
        if turns == 1:
            return reply(tool_use("Edit", {"file_path": path, "old_string": "y = 2",
                                           "new_string": "y = 20"}))  # fmt: skip
        if turns == 2:
            return reply(tool_use("Read", {"file_path": path}))
        return reply("Done.")

    requests = [r for r in _session(cli_binary, project, flow, "tune a.py")
                if "Edit" in [t["name"] for t in r.body.get("tools", [])]]  # fmt: skip
    fresh = f"a.py:2 (fresh) is explained by journal-agent journal show {ENTRY_ID}"
    changed = f"your edit changed a.py:2, explained by journal-agent journal show {ENTRY_ID}"
    assert fresh not in _sent(requests[0])  # nothing before the model touched the file
    assert fresh in _sent(requests[1])
    assert changed in _sent(requests[2])
    # Named once: the second Read adds no new line of ours.
    assert _sent(requests[3]).count(fresh) == 1 and _sent(requests[3]).count(changed) == 1
    [moment] = [m for m in read_inbox(project) if m.kind == "revise"]
    assert moment.entry == ENTRY_ID


def test_our_agent_starts_with_what_the_journal_has_on_the_file_it_was_handed(cli_binary, project):
    task = {"description": "Write", "prompt": "Write an entry about a.py:2 (zz-marker).",
            "subagent_type": "journal-agent:learning-journal"}  # fmt: skip

    def flow(body: dict[str, Any]) -> Any:
        names = [t["name"] for t in body.get("tools", [])]
        if "Agent" not in names:
            return reply("Written." if "zz-marker" in json.dumps(body) else "Side request.")
        called = [b.get("name") for m in body["messages"] if m["role"] == "assistant"
                  and isinstance(m["content"], list) for b in m["content"]]  # fmt: skip
        return reply("Done.") if "Agent" in called else reply(tool_use("Agent", task))

    requests = _session(cli_binary, project, flow, "write it down")
    said = '\\"Y Sets The Second Step\\" explains a.py:2 (fresh)'
    sub = [r for r in requests if "Agent" not in [t["name"] for t in r.body.get("tools", [])]
           and "zz-marker" in _sent(r)]  # fmt: skip
    main = [r for r in requests if "Agent" in [t["name"] for t in r.body.get("tools", [])]]
    assert sub and all(said in _sent(r) for r in sub)
    assert "rather than writing it again" in _sent(sub[0])
    assert not any(said in _sent(r) for r in main)
