"""The bottom room (journal_agent.confined): every way of reaching a file of ours refuses a
symlink (at the file or any folder on the way), a FIFO, a folder where a file belongs and a
hard link, with one sentence, and leaves what lies outside exactly as it was. Disk-full writes
are tried against the kernel itself (RLIMIT_FSIZE, and a real full tmpfs where one can be
mounted), never a mock."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from journal_agent import confined
from journal_agent.confined import Refused

SECRET = "outside: do not touch\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".journal").mkdir(parents=True)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "bashrc"
    target.parent.mkdir()
    target.write_text(SECRET)
    os.chmod(target, 0o600)
    return target


def _writers(ws: Path):
    rel = ".journal/inbox.jsonl"
    return {
        "replace": lambda: confined.replace(ws, rel, b"new\n"),
        "append": lambda: confined.append(ws, rel, b'{"x": 1}\n'),
        "lock": lambda: os.close(confined.open_lock(ws, rel)),
        "read": lambda: confined.read(ws, rel),
    }


def _plant(kind: str, ws: Path, outside: Path) -> Path:
    name = ws / ".journal" / "inbox.jsonl"
    if kind == "symlink":
        name.symlink_to(outside)
    elif kind == "dangling symlink":
        name.symlink_to(outside.parent / "not-yet")
    elif kind == "hard link":
        os.link(outside, name)
    elif kind == "fifo":
        os.mkfifo(name)
    elif kind == "directory":
        name.mkdir()
    elif kind == "symlinked folder":
        shutil.rmtree(ws / ".journal")
        (ws / ".journal").symlink_to(outside.parent)
    return name


KINDS = ["symlink", "dangling symlink", "hard link", "fifo", "directory", "symlinked folder"]
WHAT = {
    "symlink": "is a symlink to",
    "dangling symlink": "is a symlink to",
    "hard link": "is a file with 2 names (hard links)",
    "fifo": "is a FIFO (named pipe)",
    "directory": "is a directory where journal-agent needs a file",
    "symlinked folder": "is a symlink to",
}


@pytest.mark.parametrize("writer", ["replace", "append", "lock", "read"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_way_in_refuses_what_is_not_a_plain_file_of_ours(ws, outside, kind, writer):
    planted = _plant(kind, ws, outside)
    before = sorted(p.name for p in outside.parent.iterdir())
    with pytest.raises(Refused) as caught:
        _writers(ws)[writer]()  # a FIFO never blocks: the test would hang
    sentence = str(caught.value)
    # One sentence naming the path, what it is, and the command that fixes it.
    shown = ws / ".journal" if kind == "symlinked folder" else planted
    assert sentence.startswith(f"{shown} {WHAT[kind]}"), sentence
    assert "`" in sentence and sentence.count(". ") == 0 and sentence.endswith("try again.")
    # Nothing outside changed: not the file, its mode, nor a new name beside it.
    assert outside.read_text() == SECRET
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert sorted(p.name for p in outside.parent.iterdir()) == before


def test_the_fix_each_sentence_names_works(ws, outside):
    for kind in ("symlink", "fifo", "directory", "hard link"):
        planted = _plant(kind, ws, outside)
        with pytest.raises(Refused) as caught:
            confined.append(ws, planted, b"x\n")
        command = str(caught.value).split("`")[1]
        subprocess.run(command, shell=True, check=True, cwd=ws)
        confined.append(ws, planted, b"x\n")  # now it works
        assert outside.read_text() == SECRET
        os.unlink(planted)


def test_a_replace_keeps_the_mode_and_leaves_no_temp_file(ws):
    target = ws / ".journal" / "review.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    confined.replace(ws, target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(target.parent) == ["review.json"]


def test_folders_are_made_on_the_way_and_never_through_a_link(ws, outside):
    confined.replace(ws, ".journal/history/versions/abc", "text")
    assert (ws / ".journal/history/versions/abc").read_text() == "text"
    (ws / ".journal" / "runs").symlink_to(outside.parent)
    with pytest.raises(Refused, match="runs is a symlink to"):
        confined.replace(ws, ".journal/runs/x/status.json", "{}")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["bashrc"]


def test_create_never_writes_over_anything(ws, outside):
    path = ws / ".journal" / "measurements" / "r1.json"
    assert confined.create(ws, path, "first")
    assert not confined.create(ws, path, "second")
    assert path.read_text() == "first"
    (path.parent / "r2.json").symlink_to(outside)
    assert not confined.create(ws, path.parent / "r2.json", "x")
    assert outside.read_text() == SECRET


def test_unlink_and_rename_take_the_name_never_what_it_points_to(ws, outside):
    link = ws / ".journal" / "ended"
    link.symlink_to(outside.parent)
    assert confined.listdir(ws, ".journal") == ["ended"]
    with pytest.raises(Refused):
        confined.listdir(ws, link)  # the folder of a committed `ended` link is never listed
    assert confined.unlink(ws, link)
    assert outside.read_text() == SECRET and not link.exists()
    (ws / ".journal" / "s.json").symlink_to(outside)
    with pytest.raises(Refused):
        confined.rename(ws, ".journal/s.json", ".journal/done/s.json")
    (ws / ".journal" / "t.json").write_text("t")
    (ws / ".journal" / "done").mkdir()
    (ws / ".journal" / "done" / "t.json").symlink_to(outside)
    with pytest.raises(Refused):
        confined.rename(ws, ".journal/t.json", ".journal/done/t.json")
    assert not confined.rename(ws, ".journal/t.json", ".journal/done/t.json", overwrite=False)
    assert outside.read_text() == SECRET


def test_a_lock_file_planted_as_a_symlink_never_truncates_its_target(ws, outside):
    (ws / ".journal" / "locks").mkdir()
    (ws / ".journal" / "locks" / "review.lock").symlink_to(outside)
    with pytest.raises(Refused):
        confined.open_lock(ws, ".journal/locks/review.lock")
    assert outside.read_text() == SECRET


def test_paths_climbing_out_are_a_bug_not_a_request(ws):
    with pytest.raises(ValueError):
        confined.read(ws, "../etc/passwd")
    with pytest.raises(ValueError):
        confined.replace(ws, "/etc/passwd", "x")


def test_a_link_target_full_of_terminal_escapes_is_shown_inert(ws):
    (ws / ".journal" / "inbox.jsonl").symlink_to("\x1b]0;owned\x07/tmp/x")
    with pytest.raises(Refused) as caught:
        confined.read(ws, ".journal/inbox.jsonl")
    sentence = str(caught.value)
    assert "\x1b" not in sentence and "\x07" not in sentence and "?]0;owned?" in sentence


def test_a_torn_line_is_ended_before_ours(ws):
    path = ws / ".journal" / "inbox.jsonl"
    path.write_bytes(b'{"a": 1}\n{"torn"')
    confined.append(ws, path, b'{"b": 2}\n')
    assert path.read_bytes() == b'{"a": 1}\n{"torn"\n{"b": 2}\n'


def test_concurrent_appenders_never_interleave(ws):
    path = ws / ".journal" / "appends.jsonl"
    line = b"x" * 70000 + b"\n"  # larger than a pipe buffer: a write may be split

    def many():
        for _ in range(20):
            confined.append(ws, path, line)

    threads = [threading.Thread(target=many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_bytes().split(b"\n")[:-1] == [line[:-1]] * 80


def test_walk_names_every_oddity_under_the_state_folder(ws, outside):
    (ws / ".journal" / "capture").mkdir()
    (ws / ".journal" / "capture" / "recall.jsonl").symlink_to(outside)
    os.mkfifo(ws / ".journal" / "hooks.log")
    (ws / ".journal" / "inbox.jsonl").write_text("{}\n")
    os.link(ws / ".journal" / "inbox.jsonl", ws / ".journal" / "copy.jsonl")
    found = {k.removeprefix(".journal/"): v for k, v in confined.walk_files(ws, ".journal")}
    assert set(found) == {"capture/recall.jsonl", "hooks.log", "inbox.jsonl", "copy.jsonl"}
    assert "is a symlink to" in found["capture/recall.jsonl"]
    assert "is a FIFO" in found["hooks.log"]
    assert "2 names" in found["inbox.jsonl"] and "2 names" in found["copy.jsonl"]
    assert confined.problem(ws, ".journal/capture/recall.jsonl") == found["capture/recall.jsonl"]
    assert confined.problem(ws, ".journal/nothing") is None


# -- a full disk, for real ---------------------------------------------------------------------

_FSIZE_CHILD = """
import os, resource, sys
from journal_agent import confined
root, limit = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    getattr(confined, sys.argv[3])(root, ".journal/inbox.jsonl", b"y" * 5000 + b"\\n")
except confined.NoSpace as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.parametrize("how", ["append", "replace"])
def test_a_write_over_the_file_size_limit_leaves_the_file_as_it_was(ws, how):
    """RLIMIT_FSIZE makes the kernel cut the write short and then fail it (EFBIG): the line
    is not left torn, the old content stays, and the sentence says what to do."""
    path = ws / ".journal" / "inbox.jsonl"
    path.write_bytes(b'{"a": 1}\n' * 100)
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, str(ws), str(len(before) + 1000), how],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(f"could not write {path}: a file-size limit was reached")
    assert "Traceback" not in done.stderr
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == ["inbox.jsonl"]  # no temp file left


def full_tmpfs_available() -> bool:
    unshare = shutil.which("unshare")
    if not unshare or not sys.platform.startswith("linux"):
        return False
    done = subprocess.run(
        [
            unshare,
            "-rm",
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
            "mount -t tmpfs -o size=64k tmpfs /tmp",
        ],
        capture_output=True,
    )
    return done.returncode == 0


FULL_DISK = pytest.mark.skipif(
    not full_tmpfs_available(), reason="no user namespace here to mount a small tmpfs in"
)

_ENOSPC_CHILD = textwrap.dedent(
    """
    import os, sys
    from journal_agent import confined
    root = sys.argv[1]
    os.makedirs(root + "/.journal")
    with open(root + "/.journal/inbox.jsonl", "wb") as f:
        f.write(b'{"a": 1}\\n' * 100)
    fd = os.open(root + "/filler", os.O_WRONLY | os.O_CREAT)
    for size in (4096, 1):  # fill the disk to the last byte
        try:
            while True:
                os.write(fd, b"z" * size)
        except OSError:
            pass
    before = open(root + "/.journal/inbox.jsonl", "rb").read()
    for how in ("append", "replace", "create"):
        name = ".journal/new.json" if how == "create" else ".journal/inbox.jsonl"
        try:
            getattr(confined, how)(root, name, b"y" * 9000 + b"\\n")
        except confined.NoSpace as exc:
            print(how, "|", exc)
        assert open(root + "/.journal/inbox.jsonl", "rb").read() == before, how
    print(sorted(os.listdir(root + "/.journal")))
    """
)


@FULL_DISK
def test_a_full_disk_is_one_sentence_and_loses_nothing(tmp_path):
    """A real ENOSPC: a 64 KiB tmpfs mounted in a user namespace, filled to the last block."""
    script = tmp_path / "child.py"
    script.write_text(_ENOSPC_CHILD)
    mount = tmp_path / "mnt"
    mount.mkdir()
    src = Path(confined.__file__).parent.parent
    done = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=64k tmpfs "{mount}" && '
            f'PYTHONPATH="{src}" "{sys.executable}" "{script}" "{mount}/ws"',
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    for how, line in zip(("append", "replace", "create"), lines, strict=False):
        name = "new.json" if how == "create" else "inbox.jsonl"
        assert line.startswith(
            f"{how} | could not write {mount}/ws/.journal/{name}: the disk is full "
            "(No space left on device); nothing of this write was kept"
        ), lines
    assert lines[-1] == "['inbox.jsonl']"  # no temp file, nothing new


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_sqlite_is_given_a_database_only_when_it_and_its_side_files_are_plain(ws, outside, suffix):
    import sqlite3

    db = ws / ".journal" / "index.sqlite"
    assert confined.sqlite_file(ws, db) is None  # missing
    path = confined.sqlite_file(ws, db, create=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert confined.sqlite_file(ws, db) == str(db)
    side = ws / ".journal" / f"index.sqlite{suffix}"
    side.unlink(missing_ok=True)
    side.symlink_to(outside)
    with pytest.raises(Refused, match=f"index.sqlite{suffix} is a symlink to"):
        confined.sqlite_file(ws, db)
    assert outside.read_text() == SECRET


def test_a_folder_is_made_only_where_no_link_stands(ws, outside):
    assert confined.make_folder(ws, ".journal/drafts")
    assert not confined.make_folder(ws, ".journal/drafts")  # there already
    (ws / ".claude").symlink_to(outside.parent)
    with pytest.raises(Refused, match=r"\.claude is a symlink to"):
        confined.make_folder(ws, ".claude/commands")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["bashrc"]


def test_the_sandbox_makes_no_folder_through_a_cloned_state_link(ws, outside):
    """The sandbox makes .journal/drafts before a command (writable inside); a .journal that is
    a link gets nothing made where it leads."""
    from journal_agent.tools.sandbox.view import _precreate

    (ws / ".journal").rmdir()
    (ws / ".journal").symlink_to(outside.parent)
    assert [_precreate(ws, rel) for rel in (".journal", ".journal/drafts")] == [None, None]
    assert sorted(p.name for p in outside.parent.iterdir()) == ["bashrc"]


def test_a_relative_root_reaches_the_same_files(ws, monkeypatch):
    """A store given a relative root builds ``root / ".journal" / …``: the room takes that as
    joined to the root, never as a folder named like the root inside it."""
    monkeypatch.chdir(ws.parent)
    confined.replace("ws", "ws/.journal/review.json", "{}")
    confined.append(Path("ws"), Path("ws") / ".journal" / "inbox.jsonl", b"{}\n")
    confined.replace("ws", ws / ".journal" / "status.json", "{}")  # absolute beneath it
    assert sorted(os.listdir(ws / ".journal")) == ["inbox.jsonl", "review.json", "status.json"]
    assert not (ws / "ws").exists()
    with pytest.raises(ValueError):
        confined.read("ws", "ws/../../etc/passwd")
