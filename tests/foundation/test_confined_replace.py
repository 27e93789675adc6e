"""journal_agent.confined.replace: the one way every journal_agent writer replaces a file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from journal_agent import confined


def test_replaces_the_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "notes.md"
    target.write_text("old\n")
    target.chmod(0o600)
    written = confined.replace(tmp_path, target, "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert written.st_ino == target.stat().st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]


def test_a_new_file_gets_the_umask_default_and_its_parents(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        target = tmp_path / "a" / "b" / "new.json"
        confined.replace(tmp_path, target, b"{}")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"{}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_directory_where_the_file_belongs_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    target.mkdir()
    (target / "keep").write_text("kept")
    with pytest.raises(confined.Refused, match=r"status\.json is a directory"):
        confined.replace(tmp_path, target, b"new")
    assert (target / "keep").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


def test_a_failed_rename_through_a_folder_descriptor_leaves_no_temp(tmp_path: Path) -> None:
    # The rename fails for real: the target is a non-empty directory (the user's file tools
    # reach it through their own walk).
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "x").write_text("x")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError):
            confined.replace_at(fd, "dir", b"new")
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_stale_temps_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "learning_journal.md"
    target.write_text("journal")
    (tmp_path / ".learning_journal.md.tmp-0123456789ab").write_text("half")
    (tmp_path / ".other.md.tmp-0123456789ab").write_text("not ours")
    confined.remove_stale_temps(tmp_path, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.md.tmp-0123456789ab",
        "learning_journal.md",
    ]


def test_pieces_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    # An export is written a piece at a time (never held whole); one that fails midway
    # leaves the old file, or no file, and no temp behind.
    target = tmp_path / "export.json"
    confined.replace(tmp_path, target, (p.encode() for p in ["{", '"a": 1', "}"]))
    assert target.read_text() == '{"a": 1}'

    def failing():
        yield b"half of a new document"
        raise RuntimeError("the export stopped")

    with pytest.raises(RuntimeError):
        confined.replace(tmp_path, target, failing())
    with pytest.raises(RuntimeError):
        confined.create(tmp_path, tmp_path / "new.json", failing())
    assert target.read_text() == '{"a": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.json"]
