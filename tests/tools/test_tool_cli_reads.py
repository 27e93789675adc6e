"""``journal-agent tool Edit``/``Write`` after a ``tool Read`` in an earlier invocation: the read
is kept in .journal/tool-reads.json with the same staleness check as within one run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture
def run(cli, ws: Path, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()

    def call(tool: str, data: dict, *extra: str):
        return cli(
            "tool", tool, json.dumps(data), "--mode", "acceptEdits", *extra, cwd=ws, home=home
        )

    return call


def test_edit_after_a_read_in_an_earlier_invocation(run, ws: Path) -> None:
    (ws / "notes.md").write_text("alpha\nbeta\n")
    refused = run("Edit", {"file_path": "notes.md", "old_string": "beta", "new_string": "gamma"})
    assert refused.returncode == 1 and "has not been read yet" in refused.stdout
    assert run("Read", {"file_path": "notes.md"}).returncode == 0
    done = run("Edit", {"file_path": "notes.md", "old_string": "beta", "new_string": "gamma"})
    assert done.returncode == 0, done.stdout
    assert (ws / "notes.md").read_text() == "alpha\ngamma\n"
    # Our own edit is what the next call knows: a second edit needs no new Read.
    again = run("Edit", {"file_path": "notes.md", "old_string": "alpha", "new_string": "one"})
    assert again.returncode == 0, again.stdout
    wrote = run("Write", {"file_path": "notes.md", "content": "rewritten\n"})
    assert wrote.returncode == 0 and (ws / "notes.md").read_text() == "rewritten\n"


def test_a_file_changed_since_the_read_is_not_overwritten(run, ws: Path) -> None:
    (ws / "notes.md").write_text("alpha\nbeta\n")
    assert run("Read", {"file_path": "notes.md"}).returncode == 0
    (ws / "notes.md").write_text("alpha\nbeta\nthe user's line\n")  # the user's editor
    refused = run("Edit", {"file_path": "notes.md", "old_string": "beta", "new_string": "gamma"})
    assert refused.returncode == 1 and "modified since read" in refused.stdout
    assert (ws / "notes.md").read_text() == "alpha\nbeta\nthe user's line\n"
    written = run("Write", {"file_path": "notes.md", "content": "clobbered\n"})
    assert written.returncode == 1 and "modified since read" in written.stdout
    assert (ws / "notes.md").read_text() == "alpha\nbeta\nthe user's line\n"


def test_a_planted_state_file_grants_nothing_outside_the_workspace(run, ws: Path, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    st = outside.stat()
    state = ws / ".journal" / "tool-reads.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = {
        "sha256": None, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns, "inode": st.st_ino,
    }  # fmt: skip
    state.write_text(json.dumps({"reads": {str(outside): fingerprint}}))
    from journal_agent.tools.read_state import PersistentReadTracker

    assert Path(outside) not in PersistentReadTracker(ws)
    r = run("Write", {"file_path": str(outside), "content": "x\n"})
    assert r.returncode == 1 and outside.read_text() == "secret\n"
    # A symlink in place of the state file is not followed: nothing counts as read.
    state.unlink()
    os.symlink(tmp_path / "elsewhere.json", state)
    (ws / "notes.md").write_text("alpha\n")
    assert len(PersistentReadTracker(ws)) == 0
