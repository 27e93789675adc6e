"""The inbox as the CLI, the JournalInbox tool and the web view read it (journal_agent.capture)."""

from __future__ import annotations

import hashlib
import json

from journal_agent.capture import accept, dismiss, find, read_inbox
from journal_agent.tools.journal_inbox import JournalInbox
from journal_agent.tools.registry import make_context
from tests.capture.hook_helpers import capture_turn, proposals_after_session_end, run_hook


def _capture(root, transcript, *texts: str) -> None:
    capture_turn(root, transcript, "go", ("train.py", "line 5", "line 5 = warmup"), *texts)


def test_read_inbox_and_dismiss_are_the_api_other_views_use(project, transcript):
    _capture(project, transcript, "First point.", "Second point.")
    first, second = read_inbox(project)
    # The content hash is plain SHA-256 (of kind, text and records), whichever module made it.
    assert first.hash == hashlib.sha256(b"insight\0First point.\0").hexdigest()
    assert (first.text, first.files[0].spec(), first.kind) == (
        "First point.",
        "train.py:5",
        "insight",
    )
    assert find(project, "2") == second and find(project, second.id[:6]) == second

    assert dismiss(project, first.id, "written") == first
    assert read_inbox(project) == [second]
    everything = read_inbox(project, include_dismissed=True)
    assert [(m.text, m.dismissed) for m in everything] == [
        ("First point.", "written"),
        ("Second point.", ""),
    ]
    # Dismissing appends a tombstone: the moment's own line is never rewritten.
    lines = (project / ".journal" / "inbox.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["dismissed"] == first.id


def test_a_torn_or_hand_edited_line_is_skipped_not_fatal(project, transcript):
    _capture(project, transcript, "Kept.")
    with (project / ".journal" / "inbox.jsonl").open("a") as f:
        f.write('{"id": "half a li')
    _capture(project, transcript, "Also kept.")  # a later append starts on a line of its own
    assert [m.text for m in read_inbox(project)] == ["Kept.", "Also kept."]


def test_the_cli_lists_shows_and_dismisses(project, transcript, cli):
    _capture(project, transcript, "Warmup is counted in optimizer steps.")
    root = ["--root", str(project)]

    listed = cli("inbox", *root)
    assert listed.returncode == 0
    assert "  1. " in listed.stdout and "train.py:5" in listed.stdout
    assert "Warmup is counted in optimizer steps." in listed.stdout

    shown = cli("inbox", "show", "1", "--json", *root)
    moment = json.loads(shown.stdout)
    assert moment["files"] == [{"path": "train.py", "lines": [[5, 5]]}]

    assert cli("inbox", "dismiss", "1", *root).returncode == 0
    assert json.loads(cli("inbox", "--json", *root).stdout) == []
    gone = cli("inbox", "show", "1", *root)
    assert gone.returncode == 1
    assert gone.stderr == (
        "error: there are 0 waiting moments, so no number 1; `journal-agent inbox` lists them.\n"
    )


def test_the_tool_lists_moments_and_marks_them_written(project, transcript):
    _capture(project, transcript, "ZeRO-2 shards gradients.")
    tool, ctx = JournalInbox(), make_context(project)
    listing = tool.call(ctx, {})
    assert not listing.is_error
    [moment] = read_inbox(project)
    assert f"## {moment.id} (insight" in listing.content
    assert "ZeRO-2 shards gradients.\nfiles edited: train.py:5\nrecords: none" in listing.content

    assert tool.call(ctx, {"action": "written"}).is_error
    assert tool.call(ctx, {"action": "written", "ids": ["nope"]}).is_error
    done = tool.call(ctx, {"action": "written", "ids": [moment.id]})
    assert done.content == f"marked written: {moment.id}"
    assert "inbox is empty" in tool.call(ctx, {"action": "list"}).content


def test_an_accepted_moment_is_offered_first_until_written(project, transcript, cli):
    _capture(project, transcript, "First point.", "Second point.", "Third point.")
    first, second, third = read_inbox(project)
    assert accept(project, third.id).accepted
    accept(project, third.id)  # twice: still one marker, the same place
    accept(project, second.id[:6])
    ordered = read_inbox(project)
    assert [m.id for m in ordered] == [third.id, second.id, first.id]
    assert ordered[0].accepted and ordered[1].accepted and not ordered[2].accepted
    assert find(project, "1") == ordered[0]  # numbers follow the order listed

    listed = cli("inbox", "--root", str(project)).stdout.splitlines()
    assert listed[0].startswith(f"  1. {third.id}") and listed[0].endswith("(accepted)")
    listing = JournalInbox().call(make_context(project), {}).content
    assert listing.index(third.id) < listing.index(second.id) < listing.index(first.id)
    assert f"## {third.id} (insight, {third.time}, accepted by the user: offer it first)" in listing
    assert f"## {first.id} (insight, {first.time})" in listing

    dismiss(project, third.id, "written")
    assert [m.id for m in read_inbox(project)] == [second.id, first.id]
    done = read_inbox(project, include_dismissed=True)
    assert {m.id: m.dismissed for m in done}[third.id] == "written"


def test_session_rows_are_applied_only_on_request_and_then_filed(project, transcript, cli):
    _capture(project, transcript, "A point.")
    run_hook("SessionEnd", {"session_id": "s1", "reason": "other"}, project)
    assert len(proposals_after_session_end(project)) == 1
    root = ["--root", str(project)]
    listed = cli("inbox", "session", *root)
    assert "worked on train.py — 0 journal entries dated" in listed.stdout
    assert not (project / "learning_ledger.md").exists()

    applied = cli("inbox", "session", "1", "--apply", *root)
    assert applied.returncode == 0, applied.stderr
    assert "session row added" in applied.stdout
    assert "worked on train.py" in (project / "learning_ledger.md").read_text()
    assert cli("inbox", "session", *root).stdout == "no session row is proposed\n"
    assert list((project / ".journal/capture/proposals/done").glob("*.json"))
    nothing = cli("inbox", "session", "--apply", *root)
    assert nothing.returncode == 1 and "no session row is proposed" in nothing.stderr


def test_doctor_reports_the_hooks_and_their_recent_failures(project, cli):
    root = ["--root", str(project)]
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json", *root).stdout)}
    hooks = checks["capture hooks"]
    assert hooks["ok"] and hooks["detail"].startswith(
        "SessionStart, UserPromptSubmit, PostToolUse, Stop, SubagentStop, SessionEnd, "
        "SubagentStart; capture on"
    )
    assert "code recall on" in hooks["detail"]
    assert "recall logged, not injected" in hooks["detail"]
    assert "inbox draft off" in hooks["detail"]  # it spends API tokens: off until turned on
    assert checks["hook failures"] == {
        "name": "hook failures",
        "ok": True,
        "detail": "none recorded (.journal/hooks.log)",
    }

    run_hook("Stop", b"not json", project)
    off = {"JOURNAL_AGENT_CAPTURE": "0"}
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json", *root, env=off).stdout)}
    failures = checks["hook failures"]
    assert not failures["ok"] and failures["detail"].startswith("1 in the last day")
    assert "Stop JSONDecodeError" in failures["detail"]
    assert checks["capture hooks"]["detail"].endswith("all off (JOURNAL_AGENT_CAPTURE=0)")
