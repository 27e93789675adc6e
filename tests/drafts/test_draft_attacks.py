"""Adversarial review of the drafts (`inbox draft`, `accept-draft`, SessionStart's count):
``.journal/drafts/`` is the one part of ``.journal`` a sandboxed command may write, so what
lies there is the model's — files planted to be followed, to block, to be appended, to carry a
secret. Each test plants it and checks nothing outside the drafts changed."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from journal_agent.capture import drafts as store
from journal_agent.capture.status import waiting_drafts
from journal_agent.drafts.tools import DraftLog, drafting_tools
from journal_agent.errors import UserError
from journal_agent.paths import drafts_dir
from journal_agent.tools import make_context
from tests.drafts.conftest import entry

HEADER = '<!-- journal-agent draft {"created": "2026-11-26T10:00:00Z", "moments": []} -->\n'


def _journal(project: Path) -> Path:
    path = project / "learning_journal.md"
    path.write_text("# Learning Journal\n\n" + entry("An Entry Already Written"), encoding="utf-8")
    return path


def test_planted_links_fifos_folders_and_huge_files_are_not_drafts(project, tmp_path):
    """A symlink to a header'd entry outside, a FIFO, a folder, a file over 1 MiB: none is
    listed, counted by SessionStart or accepted, and none blocks."""
    journal = _journal(project)
    before = journal.read_bytes()
    folder = drafts_dir(project)
    folder.mkdir(parents=True)
    outside = tmp_path / "elsewhere.md"
    outside.write_text(HEADER + entry("Planted Outside"), encoding="utf-8")
    (folder / "link.md").symlink_to(outside)
    os.mkfifo(folder / "fifo.md")
    (folder / "folder.md").mkdir()
    (folder / "huge.md").write_text(HEADER + entry("Huge") + "x" * (1 << 20), encoding="utf-8")
    assert store.list_drafts(project) == []
    assert waiting_drafts(project) <= 1  # the huge one's first bytes are a header; no more
    for key in ("link", "fifo", "folder", "huge"):
        with pytest.raises(UserError, match="no draft has the id"):
            store.accept(project, key)
    assert journal.read_bytes() == before
    assert outside.read_text(encoding="utf-8").startswith(HEADER)  # not removed either


def test_a_draft_that_is_not_utf8_is_refused_and_kept(project):
    """Decoded with U+FFFD it would land in the journal changed, and the draft (the only copy
    of its bytes) would be deleted: refused in one sentence, nothing appended, draft kept."""
    journal = _journal(project)
    before = journal.read_bytes()
    folder = drafts_dir(project)
    folder.mkdir(parents=True)
    raw = (HEADER + entry("Caf\u00e9 Warm-up")).encode("utf-8").replace(b"\xc3\xa9", b"\xe9")
    (folder / "latin.md").write_bytes(raw)
    [listed] = store.list_drafts(project)  # still listed (shown), so the user sees it
    assert listed.id == "latin" and not listed.utf8
    with pytest.raises(UserError, match="is not UTF-8 text") as refused:
        store.accept(project, "latin")
    assert "\n" not in refused.value.message
    assert journal.read_bytes() == before
    assert (folder / "latin.md").read_bytes() == raw


def test_a_planted_draft_with_a_secret_or_two_entries_never_reaches_the_journal(project):
    journal = _journal(project)
    before = journal.read_bytes()
    folder = drafts_dir(project)
    folder.mkdir(parents=True)
    key = "AKIA" + "Q3EGRIUMK4X7ZT2B"  # an AWS access key id's shape
    secret = entry("Keys").replace("Is warm-up", f"Is {key} warm-up")
    (folder / "secret.md").write_text(HEADER + secret, encoding="utf-8")
    two = entry("First") + "\n" + entry("Second")
    (folder / "two.md").write_text(HEADER + two, encoding="utf-8")
    title = "# Learning Journal\n\n" + entry("Retitled")
    (folder / "title.md").write_text(HEADER + title, encoding="utf-8")
    for draft_id in ("secret", "two"):
        with pytest.raises(UserError):
            store.accept(project, draft_id, force=True)
        assert journal.read_bytes() == before
        assert (folder / f"{draft_id}.md").exists()
    # A draft may carry text before its heading; whatever is appended, the journal's existing
    # text stays byte for byte where it was.
    with contextlib.suppress(UserError):
        store.accept(project, "title", force=True)
    assert journal.read_bytes().startswith(before)
    assert key not in journal.read_text(encoding="utf-8")


def test_a_drafting_write_through_planted_links_changes_nothing_outside_drafts(project, tmp_path):
    """Links a sandboxed command may plant in drafts/: a symlink to the code, a symlinked folder
    out of the workspace, a hard link to the code at the very name the draft will take. The
    drafting run's Write resolves each; the code and the outside stay as they were."""
    code = project / "train.py"
    code_before = code.read_bytes()
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = drafts_dir(project)
    folder.mkdir(parents=True)
    (folder / "code.md").symlink_to(code)
    (folder / "out").symlink_to(outside)
    text = entry()
    draft_name = "warm-up-is-counted-in-steps-2026-11-26.md"
    os.link(code, folder / draft_name)
    tools = drafting_tools(DraftLog(project, moments=[]))
    ctx = make_context(project)
    for path in (".journal/drafts/code.md", ".journal/drafts/out/x.md", f"{outside}/x.md"):
        done = tools["Write"].call(ctx, {"file_path": path, "content": text})
        assert done.is_error, (path, done.content)
    target = f".journal/drafts/{draft_name}"
    saved = tools["Write"].call(ctx, {"file_path": target, "content": text})
    assert not saved.is_error, saved.content
    again = tools["JournalAppend"].call(ctx, {"entry": text})  # replaces this run's draft
    assert not again.is_error, again.content
    assert code.read_bytes() == code_before
    assert list(outside.iterdir()) == []
    assert (folder / draft_name).read_bytes() == code_before  # the link itself, not written
    assert not (project / "learning_journal.md").exists()


def test_a_planted_drafts_control_characters_never_reach_the_terminal(project):
    """Escape sequences in a planted draft's title, text, id and header (a window title, a
    cleared screen, colours, a bidi override hiding text) are written out, not sent to the
    terminal, by `inbox drafts`, `inbox drafts N` and `inbox`."""
    import subprocess
    import sys

    folder = drafts_dir(project)
    folder.mkdir(parents=True)
    meta = '{"created": "2026-11-26T10:00:00Z", "model": "m\\u001b[8m", "moments": ["\\u009b2J"]}'
    text = entry("Title \x1b]0;pwned\x07 \x1b[2J").replace("Is warm-up", "Is \u202e warm-up \r")
    (folder / "esc\x1b[31m.md").write_text(
        f"<!-- journal-agent draft {meta} -->\n{text}", encoding="utf-8"
    )
    command = str(Path(sys.executable).with_name("journal-agent"))
    shown = {}
    for args in (("inbox", "drafts"), ("inbox", "drafts", "1"), ("inbox",)):
        done = subprocess.run(
            [command, *args, "--root", str(project)], capture_output=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        shown[args] = done.stdout.decode("utf-8")  # bytes: a \r is kept as it was sent
        for control in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
            assert control not in shown[args], (args, control, shown[args])
    assert "Title \\x1b]0;pwned\\x07 \\x1b[2J" in shown[("inbox", "drafts")]
    assert "esc\\x1b[31m" in shown[("inbox", "drafts", "1")]


def test_a_draft_written_again_while_it_is_appended_is_kept(project):
    """The accept appends the version it read; a version written while that append waited for
    the journal's lock (the user's editor, a command) was not appended and must not be removed.
    The accept is held at the journal's lock (its --verbose line says it waits) while the draft
    is replaced, so the order is certain."""
    import subprocess
    import sys

    from journal_agent import confined
    from journal_agent.locks import held

    first = store.save(project, entry("First Version"), moments=[])
    journal_lock = project / ".journal" / "journal.lock"
    command = str(Path(sys.executable).with_name("journal-agent"))
    with held(journal_lock, 5.0, "held by the test"):
        proc = subprocess.Popen(
            [command, "--verbose", "inbox", "accept-draft", first.id, "--root", str(project)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        said = ""
        while "waiting for" not in said or "journal.lock" not in said:
            line = proc.stderr.readline()  # "" when it ended: it gives up on a lock it waits for
            assert line, f"the accept never waited for the journal's lock: {said}"
            said += line
        second = first.path.read_text(encoding="utf-8").replace("First Version", "Second One")
        confined.replace(project, first.path, second)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, said + err
    journal = (project / "learning_journal.md").read_text(encoding="utf-8")
    assert "## First Version" in journal and "Second One" not in journal
    assert first.path.read_text(encoding="utf-8") == second  # kept: it was never appended
