"""Whether git's index names the journal's files (a clone brought them), for the hooks.

Read as bytes through the room, never by running git (a few ms per tool call). The index of a
real project is big (2 MB at 20,000 tracked files, 10 MB at 100,000): searching it at every
PostToolUse cost ~1 ms of CPU per 20,000 files. So each answer is kept in
``.journal/capture/git-tracked.txt``, one line per question, keyed by the index as opened:
its device, inode, size, mtime and ctime in nanoseconds. Git never edits its index in place
(it writes ``index.lock`` and renames it over), so any change to what it tracks is a new key.

A repository cannot make us trust its journal by committing this file: the key holds the
ctime the clone's own index got when git wrote it, which no commit can know (nor set: ctime is
the kernel's); an answer is taken only from a file written after that index (its ctime not
before the index's); and a file git tracks is never written, nor read. Stdlib only (the hooks
run under ``python3 -I -S``).
"""

from __future__ import annotations

import mmap
import os

from journal_agent import confined

CACHE = ".journal/capture/git-tracked.txt"
KEEP = 8  # questions kept per state of the index (the hooks ask one; foreign_changes a few)


def tracked(root: str, names: tuple[bytes, ...]) -> bool:
    """Whether the git index above ``root`` names any of ``names`` (relative to ``root``). An
    index that is odd (a link, a FIFO, a gitfile that says nothing) or that git writes in
    version 4 (compressed names) counts as naming them, to be safe."""
    found = _index(root)
    if found is None:
        return False  # not in a work tree, or a repository with nothing added yet
    folder, repo, name = found
    if not repo:
        return True  # a .git file that names no git folder
    prefix = os.path.relpath(root, folder).replace(os.sep, "/")
    prefix = "" if prefix == "." else prefix + "/"
    try:
        f = confined.open_read(repo, name, one_name=False)
    except OSError:
        return True
    if f is None:
        return True
    with f:
        st = os.fstat(f.fileno())
        question = (prefix.encode() + b"|" + b"|".join(names)).hex()
        key = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        lines = _cached(root, key, st.st_ctime_ns)
        if question in lines:
            return lines[question]
        answer, ours = _search(f.fileno(), st.st_size, prefix.encode(), names)
    if ours:  # (a cache git tracks is a repository's, not ours: never written)
        lines[question] = answer
        _write(root, key, lines)
    return answer


def _index(root: str) -> tuple[str, str, str] | None:
    """``(work tree, folder, name)`` of the index that decides for ``root``; None outside a
    work tree or before anything was added; ``(..., "", "")`` for a gitfile that names none."""
    folder = root
    while not os.path.lexists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    repo, name = folder, ".git/index"
    if not os.path.isdir(os.path.join(folder, ".git")):
        gitfile = confined.read_planted(folder, ".git", 4096)  # a worktree's "gitdir: PATH"
        line = (gitfile or b"").split(b"\n", 1)[0]
        if not line.startswith(b"gitdir:"):
            return folder, "", ""
        target = os.path.join(folder, os.fsdecode(line[7:].strip()))
        repo, name = os.path.normpath(target), "index"
    if confined.lstat(repo, name) is None:
        return None
    return folder, repo, name


def _search(fd: int, size: int, prefix: bytes, names: tuple[bytes, ...]) -> tuple[bool, bool]:
    """``(whether the index names any of names, whether it leaves the cache file untracked)``."""
    if size == 0:
        return False, True
    try:
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return True, False
    with data:
        if data[4:8] == b"\x00\x00\x00\x04":
            return True, False
        found = any(data.find(prefix + t + b"\x00") != -1 for t in names)
        return found, data.find(prefix + CACHE.encode() + b"\x00") == -1


def _cached(root: str, key: str, index_ctime: int) -> dict[str, bool]:
    """The answers kept for the index ``key`` (none when the file is of another state, or
    older than the index: a clone wrote it, not us)."""
    try:
        f = confined.open_read(root, CACHE)
    except OSError:
        return {}
    if f is None:
        return {}
    with f:
        written = os.fstat(f.fileno()).st_ctime_ns
        data = f.read(4096)
    if written < index_ctime:
        return {}
    lines = data.decode("ascii", "replace").split("\n")
    if lines[0] != key:
        return {}
    out: dict[str, bool] = {}
    for line in lines[1:]:
        question, _, answer = line.partition(" ")
        if answer in ("0", "1"):
            out[question] = answer == "1"
    return out


def _write(root: str, key: str, lines: dict[str, bool]) -> None:
    """Keep the answers (a cache: no fsync; a folder that cannot be written keeps none)."""
    folder = os.path.join(root, ".journal")
    if os.path.islink(folder) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return
    kept = list(lines.items())[-KEEP:]
    text = key + "\n" + "".join(f"{q} {int(a)}\n" for q, a in kept)
    try:
        confined.replace(root, CACHE, text.encode(), durable=False)
    except OSError:  # (Refused is one)
        return
