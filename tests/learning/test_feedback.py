"""The feedback loop you can undo, end to end: eject /learn, the agent edits it (Edit keeps the
old version), the user's feedback is recorded with that change, shown, diffed and reverted —
and the revert is itself in the history and can be undone."""

from __future__ import annotations

import json
import shutil

from journal_agent.paths import plugin_root
from journal_agent.tools.edit import Edit
from journal_agent.tools.read import Read
from journal_agent.tools.registry import make_context

OLD = '**If user says**: "I wish there were practice problems"'
NEW = '**If user says**: "I wish there were practice problems" (asked for twice now)'


def _agent_edits(ws, old: str, new: str) -> None:
    """What /learn's model does after the user's feedback: Read, then Edit its own file."""
    ctx = make_context(ws, mode="bypassPermissions")
    path = str(ws / ".claude" / "commands" / "learn.md")
    assert not Read().call(ctx, {"file_path": path}).is_error
    result = Edit().call(ctx, {"file_path": path, "old_string": old, "new_string": new})
    assert not result.is_error, result.content


def test_feedback_history_diff_and_revert(ws, cli):
    assert cli("commands", "--eject", "learn").returncode == 0
    learn = ws / ".claude" / "commands" / "learn.md"
    original = learn.read_bytes()

    _agent_edits(ws, OLD, NEW)
    r = cli("feedback", "Practice problems, please — I keep asking", "--file", "learn")
    assert r.returncode == 0, r.stderr
    assert "#1: feedback recorded with its change to .claude/commands/learn.md (+1 -1" in r.stdout

    _agent_edits(ws, "## Meta-Learning: Improving This Command", "## Meta-Learning (v2)")
    r = cli("feedback", "Shorter headings", "--json")
    second = json.loads(r.stdout)
    assert (second["n"], second["added"], second["removed"]) == (2, 1, 1)

    history = cli("feedback", "--history").stdout.splitlines()
    assert len(history) == 2
    assert history[0].startswith("#1  ") and history[0].endswith(
        ".claude/commands/learn.md  +1 -1  Practice problems, please — I keep asking"
    )
    diff = cli("feedback", "--diff", "1").stdout
    assert f"-{OLD}\n" in diff and f"+{NEW}\n" in diff
    assert "Meta-Learning (v2)" not in diff  # change 2 is not part of change 1

    # Revert change 1: the file goes back to how it was before it (and so before change 2).
    r = cli("feedback", "--revert", "1")
    assert r.returncode == 0, r.stderr
    assert "#3: .claude/commands/learn.md is back as it was before change #1" in r.stdout
    assert learn.read_bytes() == original
    records = json.loads(cli("feedback", "--history", "--json").stdout)
    assert [(x["n"], x["kind"], x["reverts"]) for x in records] == [
        (1, "feedback", None),
        (2, "feedback", None),
        (3, "revert", 1),
    ]
    # The revert is a change like any other: undo it.
    assert cli("feedback", "--revert", "3").returncode == 0
    text = learn.read_text(encoding="utf-8")
    assert NEW in text and "## Meta-Learning (v2)" in text
    r = cli("feedback", "--revert", "3")
    assert r.returncode == 1 and "already as it was before change #3" in r.stderr
    assert cli("feedback", "--revert", "4").returncode == 0  # undo the undo
    assert learn.read_bytes() == original
    assert len(json.loads(cli("feedback", "--history", "--json").stdout)) == 5


def test_any_ejected_agent_file_and_clear_errors(ws, cli):
    agents = ws / ".claude" / "agents"
    agents.mkdir(parents=True)
    shutil.copyfile(
        plugin_root() / "agents" / "learning-journal.md", agents / "learning-journal.md"
    )
    r = cli("feedback", "Entries are great as they are", "--file", "learning-journal")
    assert r.returncode == 0, r.stderr
    assert "has not changed since the last record" in r.stdout
    for args, words in [
        (("feedback", "x", "--file", "nope"), "no ejected command or agent file matches 'nope'"),
        (("feedback",), "give exactly one of"),
        (("feedback", "--diff", "9"), "no feedback record #9"),
        (("feedback", "  ", "--file", "learning-journal"), "the feedback is empty"),
    ]:
        r = cli(*args)
        assert r.returncode != 0 and words in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
