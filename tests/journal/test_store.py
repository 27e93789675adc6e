"""Appending: first use, never losing a byte, parallel writers, and writers killed mid-append."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest

from journal_agent.errors import UserError
from journal_agent.journal import api
from journal_agent.journal.model import parse_journal
from journal_agent.journal.store import HEADER

from .conftest import make_entry


def test_first_append_creates_the_journal_with_the_users_header(ws):
    outcome = api.append_entry(ws.workspace, make_entry())
    text = ws.journal.read_text(encoding="utf-8")
    assert text.startswith(HEADER + "\n## ZeRO Stage 2 (2026-11-21)\n")
    assert "<!-- entry: zero-stage-2-2026-11-21 -->" in text
    assert outcome.line == HEADER.count("\n") + 2
    assert text.splitlines()[outcome.line - 1] == "## ZeRO Stage 2 (2026-11-21)"


def test_append_keeps_every_existing_byte_and_the_files_line_endings(ws):
    original = HEADER.replace("\n", "\r\n") + "\r\nhand-written note  \r\nno final newline"
    ws.journal.write_bytes(original.encode("utf-8"))
    api.append_entry(ws.workspace, make_entry())
    data = ws.journal.read_bytes()
    assert data.startswith(original.encode("utf-8") + b"\r\n")
    tail = data[len(original) :]
    assert b"\n" not in tail.replace(b"\r\n", b"")  # the new entry uses CRLF too
    assert parse_journal(data.decode("utf-8")).render() == data.decode("utf-8")


def test_same_title_and_date_get_distinct_ids(ws):
    first = api.append_entry(ws.workspace, make_entry())
    # The same entry twice is a duplicate: forced, to test the ids.
    second = api.append_entry(ws.workspace, make_entry(), force=True)
    assert (first.entry_id, second.entry_id) == (
        "zero-stage-2-2026-11-21",
        "zero-stage-2-2026-11-21-2",
    )
    assert [e.id for e in api.load(ws.workspace).entries] == [first.entry_id, second.entry_id]


@pytest.mark.slow
def test_sixteen_processes_appending_at_once_lose_nothing(ws, cli):
    procs = []
    env = cli.environment({"JOURNAL_AGENT_ROOT": str(ws.root)})
    for _ in range(16):
        procs.append(
            subprocess.Popen(
                # --force: the sixteen entries are alike on purpose (see test_search's race).
                cli.command("journal", "append", "--force", "-"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
            )
        )
    for n, proc in enumerate(procs):
        proc.stdin.write(make_entry(title=f"Writer {n}", body=f"Marker {n}.\n"))
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    journal = api.load(ws.workspace)
    assert sorted(e.title for e in journal.entries) == sorted(f"Writer {n}" for n in range(16))
    assert all(f"Marker {e.title.split()[1]}." in e.raw for e in journal.entries)
    # Intact: nothing to report but that the alike entries repeat each other (they were forced).
    assert {p.kind for p in api.check(ws.workspace).problems} <= {"near_duplicate"}
    assert ws.journal.read_text().startswith(HEADER)


def _crash_entry(n: int) -> str:
    return make_entry(title=f"Crash {n}", body=f"END-{n}\n")


@pytest.mark.slow
def test_writer_killed_at_random_points_leaves_old_or_new_journal(ws):
    rng = random.Random(1234)
    api.append_entry(ws.workspace, _crash_entry(0), force=True)
    previous = ws.journal.read_text()
    appended = 1
    killed_mid_write = 0  # the temp file was left behind: killed between write and rename
    for _ in range(200):
        pid = os.fork()
        if pid == 0:  # child: append as fast as it can until killed
            try:
                n = appended
                while True:
                    api.append_entry(ws.workspace, _crash_entry(n), force=True)
                    n += 1
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        killed_mid_write += bool(list(ws.root.glob(".learning_journal.md.tmp-*")))

        text = ws.journal.read_text(encoding="utf-8")
        assert text.startswith(previous)  # nothing old is ever lost or torn
        journal = parse_journal(text)
        assert journal.render() == text
        titles = [e.title for e in journal.entries]
        assert titles == [f"Crash {n}" for n in range(len(titles))]
        for entry in journal.entries[appended:]:
            # Each new entry is complete: its last body line and the closing rule are there.
            assert f"END-{entry.title.split()[1]}\n" in entry.raw
            assert entry.raw.rstrip("\n").endswith("\n---")
        appended = len(journal.entries)
        previous = text
    assert appended > 1
    assert killed_mid_write > 0  # the test did hit the window it is about (about 1 kill in 3)
    # The lock is free again and the journal still takes appends; stale temp files are gone.
    api.append_entry(ws.workspace, _crash_entry(appended), force=True)
    assert not list(ws.root.glob(".learning_journal.md.tmp-*"))
    assert {p.kind for p in api.check(ws.workspace).problems} <= {"near_duplicate"}


def test_line_numbers_stay_right_and_hand_edits_between_appends_are_seen(ws):
    api.append_entry(ws.workspace, make_entry())
    ws.journal.write_bytes(ws.journal.read_bytes() + b"\nhand note\n")
    second = api.append_entry(ws.workspace, make_entry(title="Second"))
    third = api.append_entry(ws.workspace, make_entry(title="Third"))
    lines = ws.journal.read_text(encoding="utf-8").splitlines()
    assert lines[second.line - 1] == "## Second (2026-11-21)"
    assert lines[third.line - 1] == "## Third (2026-11-21)"
    ws.journal.write_bytes(ws.journal.read_bytes() + b"caf\xe9\n")
    with pytest.raises(UserError, match="not valid UTF-8"):
        api.append_entry(ws.workspace, make_entry(title="Fourth"))


def test_the_encoding_is_checked_a_megabyte_at_a_time_across_the_chunk_edges(ws):
    # journal related checks it so (its text whole took 500 MB for a 100 MB journal): a
    # character split across the reads is fine, a bad byte anywhere is the one sentence.
    store = ws.workspace.journal
    body = ("x" * ((1 << 20) - 2) + "🏷️ tags\n" + "y" * (1 << 20) + "\n").encode()
    ws.journal.write_bytes(body)
    store.check_encoding()
    ws.journal.write_bytes(body + b"caf\xe9\n")
    with pytest.raises(UserError, match=r"not valid UTF-8 \(line 3\)"):
        store.check_encoding()
    ws.journal.write_bytes(body + "🏷️".encode()[:2])  # ends inside a character
    with pytest.raises(UserError, match="not valid UTF-8"):
        store.check_encoding()


def test_an_unclosed_code_block_cannot_swallow_appended_entries(ws):
    ws.journal.write_text(HEADER + "\n````python\nprint('left open by hand')\n", encoding="utf-8")
    draft = make_entry(title="Open Fence") + "\n~~~\nunclosed in the draft too\n"
    assert api.append_entry(ws.workspace, draft).appended
    assert api.append_entry(ws.workspace, make_entry(title="After")).appended
    titles = [e.title for e in api.load(ws.workspace).entries]
    assert titles == ["Open Fence", "After"]
    text = ws.journal.read_text(encoding="utf-8")
    assert "print('left open by hand')\n````\n" in text and "too\n~~~\n" in text


def test_a_tolerated_index_failure_is_shown_with_verbose(ws, cli) -> None:
    """The append succeeds when the search index cannot be updated; --verbose says why.

    A real process: --verbose configures the process's logging.
    """
    entry = ws.write("entry.md", make_entry())
    (ws.root / ".journal" / "index.sqlite").mkdir(parents=True)  # cannot be opened as a database
    env = {"JOURNAL_AGENT_ROOT": str(ws.root)}
    args = ["journal", "append", "--file", str(entry)]
    quiet = cli.process(*args, "--force", env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert "search index" not in quiet.stderr
    ws.write("entry.md", make_entry(title="FSDP"))
    loud = cli.process("--verbose", *args, env=env)
    assert loud.returncode == 0, loud.stderr
    assert "search index not updated after appending fsdp-2026-11-21" in loud.stderr
    assert "appended fsdp-2026-11-21" in loud.stdout
