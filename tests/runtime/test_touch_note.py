"""Our own runtime's tools speak as the plugin's PostToolUse does (#33): a Read of lines an
entry explains carries that entry's line in its result, once per run; a clone's journal is
silent. The real Read tool, the real loop over a scripted transport."""

from __future__ import annotations

import subprocess

from journal_agent.testing import ScriptedModel, reply, tool_use
from journal_agent.tools.registry import builtin_tools
from tests.entries import render_entry
from tests.runtime.runtime_helpers import make_loop


def _project(tmp_path, cli):
    (tmp_path / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    entry = render_entry(
        "Y Sets The Second Step", "2026-11-20", context="Tuning a.py.", question="What is y?",
        intuition="y sets the schedule's second step (a.py:2).", tags="#schedule",
    )  # fmt: skip
    assert cli("journal", "append", "-", "--root", str(tmp_path), input=entry).returncode == 0


def _results(tmp_path) -> list[str]:
    read = tool_use("Read", {"file_path": str(tmp_path / "a.py")})
    again = tool_use("Read", {"file_path": "a.py"})
    model = ScriptedModel([reply(read), reply(again), reply("Done.")])
    tools = [builtin_tools()["Read"]]
    assert make_loop(model, tmp_path, tools).run("look").status == "completed"
    return [str(r.body["messages"][-1]["content"][0]["content"]) for r in model.requests[1:]]


def test_a_read_of_cited_lines_carries_the_entrys_line_once_per_run(tmp_path, cli):
    _project(tmp_path, cli)
    first, second = _results(tmp_path)
    line = "a.py:2 (fresh) is explained by journal-agent journal show y-sets-the-second-step-2026-"
    line += "11-20"
    assert "y = 2" in first and line in first
    assert "y = 2" in second and line not in second  # once per run
    assert line in _results(tmp_path)[0]  # a new run hears it again


def test_a_clones_journal_is_silent_in_the_runtime_too(tmp_path, cli):
    _project(tmp_path, cli)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "learning_journal.md"], cwd=tmp_path, check=True)
    first, _ = _results(tmp_path)
    assert "y = 2" in first and "explained" not in first


def test_the_tool_command_prints_what_the_model_gets_the_journals_line_included(tmp_path, cli):
    """`journal-agent tool` prints a result "exactly as the model would see it": the line the
    runtime adds for cited code was missing, and an edit of it left no revise moment."""
    _project(tmp_path, cli)
    read = cli("tool", "Read", '{"file_path": "a.py"}', "--root", str(tmp_path))
    assert read.returncode == 0, read.stderr
    assert "y = 2" in read.stdout
    assert "a.py:2 (fresh) is explained by journal-agent journal show y-sets-the" in read.stdout
    edit = '{"file_path": "a.py", "old_string": "y = 2", "new_string": "y = 4"}'
    done = cli("tool", "Edit", edit, "--mode", "acceptEdits", "--root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "your edit changed a.py:2, explained by journal-agent journal show" in done.stdout
    inbox = (tmp_path / ".journal/inbox.jsonl").read_text()
    assert '"kind": "revise"' in inbox and "y-sets-the-second-step-2026-11-20" in inbox
