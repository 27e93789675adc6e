"""Feedback records are validated when read (finding 4 of the third review): ``feedback
--revert`` wrote any path a line of ``.journal/history/feedback.jsonl`` named — outside the
workspace, or ``.claude/settings.local.json`` with ``bypassPermissions`` — and ``--history``
listed such lines as ordinary records. Every case runs the real CLI on a real workspace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from journal_agent.learning.feedback import FeedbackLog
from journal_agent.tools.edit import Edit
from journal_agent.tools.read import Read
from journal_agent.tools.registry import make_context

EVIL = json.dumps({"permissions": {"defaultMode": "bypassPermissions"}}) + "\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return Path(os.path.realpath(root))


@pytest.fixture
def run(cli, ws: Path, tmp_path: Path):
    """The CLI (in-process) in the workspace, with a home of its own."""
    (tmp_path / "home").mkdir()
    return lambda *args: cli(*args, cwd=ws, home=tmp_path / "home")


@pytest.fixture
def recorded(ws, run) -> Path:
    """/learn ejected, edited by the agent, and feedback #1 recorded with that change."""
    assert run("commands", "--eject", "learn").returncode == 0
    learn = ws / ".claude/commands/learn.md"
    ctx = make_context(ws, mode="bypassPermissions")
    Read().call(ctx, {"file_path": str(learn)})
    text = learn.read_text(encoding="utf-8")
    done = Edit().call(ctx, {"file_path": str(learn), "old_string": text[:40],
                             "new_string": text[:40] + " (edited)"})  # fmt: skip
    assert not done.is_error, done.content
    assert run("feedback", "more examples", "--file", "learn").returncode == 0
    return learn


def _tamper(ws: Path, **fields) -> None:
    """An outside hand appends a line (the model's tools cannot write .journal/)."""
    log = FeedbackLog(ws)
    first = log.records()[0].to_dict()
    line = {**first, "n": 2, "kind": "feedback", "feedback": "x", **fields}
    with log.path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


@pytest.mark.parametrize(
    ("name", "where"),
    [("../victim/pwned.txt", "outside"), (".claude/settings.local.json", "settings"),
     ("/etc/cron.d/x", "absolute"), (".claude/commands/../../notes.md", "dotdot")],
)  # fmt: skip
def test_finding_04_a_record_naming_anything_else_is_tampered_and_not_applied(
    ws, run, recorded, name, where
):
    before = FeedbackLog(ws).store(EVIL.encode())
    _tamper(ws, file=name, before=before)
    history = run("feedback", "--history")
    assert history.returncode == 1
    assert history.stdout.count("\n") == 1 and history.stdout.startswith("#1 ")
    assert "line 2" in history.stderr and "(record #2) was tampered with" in history.stderr
    assert "Traceback" not in history.stderr
    revert = run("feedback", "--revert", "2")
    assert revert.returncode == 1 and "Traceback" not in revert.stderr
    assert "was tampered with" in revert.stderr and "not applied" in revert.stderr
    assert not (ws.parent / "victim").exists()
    assert not (ws / ".claude/settings.local.json").exists()
    assert not (ws / "notes.md").exists()
    # The valid record still reverts.
    assert run("feedback", "--revert", "1").returncode == 0


@pytest.mark.parametrize(
    "fields",
    [{"n": "2"}, {"added": "many"}, {"before": "../../../../etc/passwd"}, {"kind": "delete"},
     {"time": "yesterday"}, {"extra": 1}],
    ids=["n-text", "added-text", "before-path", "kind", "time", "extra-field"],
)  # fmt: skip
def test_finding_04_valid_json_of_the_wrong_shape_is_reported_not_a_traceback(
    ws, run, recorded, fields
):
    _tamper(ws, **fields)
    history = run("feedback", "--history")
    assert history.returncode == 1 and "Traceback" not in history.stderr
    assert "line 2" in history.stderr and "was tampered with" in history.stderr
    assert len(history.stderr.strip().splitlines()) == 1
    diff = run("feedback", "--diff", "1")
    assert diff.returncode == 0  # the good record is still usable


def test_finding_04_revert_does_not_follow_a_command_file_turned_symlink(
    ws, run, recorded, tmp_path
):
    outside = tmp_path / "outside.md"
    outside.write_text("precious\n")
    os.remove(recorded)
    recorded.symlink_to(outside)
    revert = run("feedback", "--revert", "1")
    assert revert.returncode == 1 and "Traceback" not in revert.stderr
    assert "outside the workspace" in revert.stderr
    assert outside.read_text() == "precious\n"
