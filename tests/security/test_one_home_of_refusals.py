"""What a file of ours may be is decided in one place, profiling/_nofollow.py, for both rooms:
journal_agent.confined (the journal, .journal/, the hooks) and profiling/_files.py (records,
reports; profiling never imports journal_agent). Each plants the same oddities and sees both
refuse them, naming the same thing, with nothing read through them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journal_agent import confined
from profiling import _files
from profiling.errors import ProfilingError

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\n"


def _plant(root: Path, kind: str, outside: Path) -> Path:
    folder = root / ".journal" / "measurements"
    folder.mkdir(parents=True)
    target = folder / "est-00000001.json"
    if kind == "symlink":
        target.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "hard link":
        os.link(outside, target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "linked folder":
        folder.rmdir()
        folder.symlink_to(outside.parent)
    return target


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("symlink", "is a symlink to "),
        ("fifo", "is a FIFO (named pipe)"),
        ("hard link", "is a file with 2 names (hard links)"),
        ("folder", "is a directory where"),
        ("linked folder", "measurements is a symlink to "),
    ],
)
def test_both_rooms_refuse_the_same_planted_oddity(tmp_path, kind, said):
    outside = tmp_path / "home" / "id_ed25519"
    outside.parent.mkdir()
    outside.write_bytes(SECRET)
    root = tmp_path / "project"
    target = _plant(root, kind, outside)
    with pytest.raises(confined.Refused) as ours:
        confined.read(root, target)
    with pytest.raises(ProfilingError) as theirs:
        _files.read(root, target)
    assert said in str(ours.value) and said in str(theirs.value)
    assert outside.read_bytes() == SECRET


def test_both_refuse_a_path_that_climbs_out(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    with pytest.raises(ValueError, match="climbs out"):
        confined.read(root, "../outside")
    with pytest.raises(ValueError, match="is not beneath"):
        _files.open_dir(root, Path("a/../../outside"), create=False)
