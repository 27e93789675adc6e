"""The plugin's hooks inside the real Claude Code CLI, offline, on the oldest supported version
(2.1.197) and the latest: what they capture, what they tell the model, and that they never
break a session or fire themselves again."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from journal_agent.capture import read_inbox
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.capture.hook_helpers import proposals_after_session_end
from tests.e2e.claude_helpers import REPO, claude_clis, run_claude, texts

CLIS = claude_clis()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CLIS, reason="no Claude Code CLI (.ci/run installs two)"),
]
INSIGHT = (
    "`★ Insight ─────────────────────────────────────`\n"
    "Raising y changes the schedule's second step (a.py:2).\n"
    "`─────────────────────────────────────────────────`"
)


@pytest.fixture(params=CLIS, ids=[version for version, _ in CLIS])
def cli_binary(request) -> str:
    return request.param[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    return Path(os.path.realpath(root))


def _session(binary, project, flow, *, plugin: Path = REPO, env=None, prompt="tune a.py"):
    """``claude -p`` in ``project`` with ``plugin`` loaded; returns (result, requests)."""
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    model = ScriptedModel([flow] * 40)
    with model.serve() as url:
        done = run_claude(
            [
                *("-p", prompt, "--plugin-dir", str(plugin), "--output-format", "json"),
                *("--permission-mode", "acceptEdits"),
            ],
            cwd=project,
            home=home,
            base_url=url,
            binary=binary,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout), list(model.requests)


def _edit_flow(project: Path):
    """Read a.py, then an Edit whose message carries the Insight, then a plain final answer."""

    def flow(body: dict[str, Any]) -> Any:
        if "Edit" not in [t["name"] for t in body.get("tools", [])]:
            return reply("Side request.")
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        path = str(project / "a.py")
        if turns == 0:
            return reply(tool_use("Read", {"file_path": path}))
        if turns == 1:
            edit = {"file_path": path, "old_string": "y = 2", "new_string": "y = 20\nw = 4"}
            return reply("Editing.\n\n" + INSIGHT, tool_use("Edit", edit))
        return reply("Done.")

    return flow


def test_a_turn_with_an_insight_and_an_edit_ends_as_one_moment(cli_binary, project):
    result, _ = _session(cli_binary, project, _edit_flow(project))
    assert result["result"] == "Done."
    [moment] = read_inbox(project)
    assert moment.text == "Raising y changes the schedule's second step (a.py:2)."
    assert [f.spec() for f in moment.files] == ["a.py:2-3"]
    assert (project / "a.py").read_text().splitlines()[1:3] == ["y = 20", "w = 4"]
    assert moment.session_id == result["session_id"] and moment.prompt_id
    assert not (project / ".journal" / "hooks.log").exists()
    # SessionEnd ran within Claude Code's budget and its detached child outlived `claude -p`:
    # the 📚 row is proposed, not applied.
    [proposal] = proposals_after_session_end(project)
    [op] = json.loads(proposal.read_text())["operations"]
    assert op["topic"] == "worked on a.py" and "1 learning moment captured" in op["outcome"]
    assert not (project / "learning_ledger.md").exists()


def _our_lines(requests) -> set[str]:
    """Lines our SessionStart hook put into the main conversation's requests."""
    every = "\n".join(t for r in requests if r.body.get("tools") for t in texts(r))
    return set(re.findall(r"journal-agent: \d[^\n]*", every))


def test_session_start_tells_the_model_what_is_due_and_nothing_otherwise(cli_binary, project):
    _, requests = _session(cli_binary, project, lambda body: reply("Hello."), prompt="hi")
    assert _our_lines(requests) == set()
    assert not (project / ".journal").exists()

    from journal_agent.capture.store import append, new_moment

    append(project, [new_moment("insight", "Waiting to be written.")])
    _, requests = _session(cli_binary, project, lambda body: reply("Hello."), prompt="hi")
    line = (
        "journal-agent: 1 captured learning moment waiting in the inbox "
        "(/journal-agent:learn or `journal-agent inbox`)."
    )
    assert _our_lines(requests) == {line}


def test_garbage_sent_to_the_hooks_leaves_the_session_working(cli_binary, project, tmp_path):
    """A plugin whose hooks feed random bytes to our script: the session answers as usual."""
    plugin = tmp_path / "garbage-plugin"
    (plugin / "hooks").mkdir(parents=True)
    for part in (".claude-plugin", "journal_agent", "profiling"):  # the hooks import both
        (plugin / part).symlink_to(REPO / part)
    shutil.copy(REPO / "hooks" / "capture.py", plugin / "hooks" / "capture.py")
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())
    feed = 'head -c 5000 /dev/urandom | python3 -I -S "$0" "$1"'
    for groups in hooks["hooks"].values():
        for hook in (h for g in groups for h in g["hooks"]):
            hook["args"] = ["-c", feed, "${CLAUDE_PLUGIN_ROOT}/hooks/capture.py", hook["args"][1]]
            hook["command"] = "sh"
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hooks))

    result, _ = _session(cli_binary, project, lambda body: reply("Still here."), plugin=plugin)
    assert result["result"] == "Still here." and not result["is_error"]
    log = (project / ".journal" / "hooks.log").read_text().splitlines()
    assert log and all("Error" in line or "stdin" in line for line in log)
    assert read_inbox(project) == []


def test_a_child_started_from_a_hook_does_not_fire_the_hooks_again(cli_binary, project):
    """What our hooks start carries JOURNAL_AGENT_HOOK=1; a `claude` run under it (as a child of
    a hook would be) captures nothing and says nothing."""
    from journal_agent.capture.store import append, new_moment

    append(project, [new_moment("insight", "Waiting.")])
    before = (project / ".journal" / "inbox.jsonl").read_bytes()
    result, requests = _session(
        cli_binary, project, _edit_flow(project), env={"JOURNAL_AGENT_HOOK": "1"}
    )
    assert result["result"] == "Done."
    assert (project / ".journal" / "inbox.jsonl").read_bytes() == before
    assert _our_lines(requests) == set()
    assert not (project / ".journal" / "capture").exists()


def test_claude_code_validates_the_plugin_strictly(cli_binary, tmp_path):
    done = run_claude(
        ["plugin", "validate", "--strict", str(REPO / ".claude-plugin" / "plugin.json")],
        cwd=REPO,
        home=tmp_path,
        binary=cli_binary,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout


def test_the_learning_journal_output_style_keeps_the_coding_instructions(cli_binary, project):
    """`/output-style journal-agent:Learning journal` (here: the setting it writes)."""
    settings = project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"outputStyle": "journal-agent:Learning journal"}))
    _, requests = _session(cli_binary, project, lambda body: reply("ok"), prompt="hi")
    main = json.dumps([r.body for r in requests if r.body.get("tools")], ensure_ascii=False)
    assert "# Output Style: journal-agent:Learning journal" in main
    assert "`★ Insight ─────────────────────────────────────`" in main
    assert "Every number carries its source" in main
    assert "# Environment" in main  # Claude Code's own instructions are still there


def _agent_flow(subagent_type: str, marker: str):
    """The main thread delegates to ``subagent_type``, whose answer carries an Insight."""

    def flow(body: dict[str, Any]) -> Any:
        system = body.get("system", "")
        if isinstance(system, list):
            system = "\n".join(b.get("text", "") for b in system)
        names = [t["name"] for t in body.get("tools", [])]
        if "Agent" not in names:
            if marker in json.dumps(body.get("messages", [])):
                return reply("Found it.\n\n" + INSIGHT.replace("Raising y", f"Sub-agent {marker}"))
            return reply("Side request.")
        if "Agent" in [
            b.get("name")
            for m in body["messages"]
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]
        ]:
            return reply("Done.")
        task = {
            "description": "Look",
            "prompt": f"Look into {marker}.",
            "subagent_type": subagent_type,
        }
        return reply(tool_use("Agent", task))

    return flow


@pytest.mark.parametrize(
    ("subagent_type", "captured"),
    [("journal-agent:learning-journal", False), ("general-purpose", True)],
    ids=["our-learning-journal", "another-agent"],
)
def test_a_subagents_insight_is_captured_unless_it_is_our_own_agent(
    cli_binary, project, subagent_type, captured
):
    _, requests = _session(
        cli_binary, project, _agent_flow(subagent_type, "zz-marker"), prompt="look"
    )
    # The sub-agent ran (its own requests, without the Agent tool) and answered with an Insight.
    sub = [r for r in requests if "zz-marker" in json.dumps(r.body.get("messages", []))]
    assert any("Agent" not in [t["name"] for t in r.body.get("tools", [])] for r in sub)
    moments = read_inbox(project)
    if not captured:
        assert moments == []
        return
    [moment] = moments
    assert moment.agent == subagent_type and moment.text.startswith("Sub-agent zz-marker")
