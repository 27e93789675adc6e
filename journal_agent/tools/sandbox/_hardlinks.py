"""Other names of a masked file: hard links made before the call.

A bind mount hides a *name*; the inode behind it stays readable under any other name. So
``ln .env notes.txt`` made outside the sandbox (or a key in ``~/.ssh`` hard-linked into the
project) would show the secret as ``cat notes.txt``. For every masked file with more than one
link, and every multiply-linked regular file inside a masked directory, the workspace is
walked for other names of the same inode, and those are masked too.

The common case costs nothing but a ``stat`` of each masked path (and a listing of the few
masked directories, such as ``~/.ssh``): the workspace is walked only when a multiply-linked
secret exists. Names are matched on the inode number ``readdir`` already gives
(:meth:`os.DirEntry.inode`) and confirmed with ``lstat`` (device and inode).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from journal_agent.tools.sandbox._hidden_files import MAX_ENTRIES, SKIP_DIRS

# Files looked at inside masked directories (~/.ssh, ~/.aws, ~/.config/gcloud …), per call.
_MAX_IN_MASKED = 2_000

Inode = tuple[int, int]  # (st_dev, st_ino)


def other_links(masked: list[Path], root: Path) -> tuple[list[Path], bool]:
    """(names in ``root`` of the masked inodes that are not masked yet, walk truncated?)"""
    inodes = _linked_secrets(masked)
    if not inodes:
        return [], False
    return _names_in(root, inodes, skip={str(p) for p in masked})


def _linked_secrets(masked: list[Path]) -> set[Inode]:
    found: set[Inode] = set()
    budget = _MAX_IN_MASKED
    for p in masked:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            found.add((st.st_dev, st.st_ino))
        elif stat.S_ISDIR(st.st_mode):
            budget = _linked_in_dir(str(p), found, budget)
    return found


def _linked_in_dir(top: str, found: set[Inode], budget: int) -> int:
    stack = [top]
    while stack and budget > 0:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    budget -= 1
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        if st.st_nlink > 1:
                            found.add((st.st_dev, st.st_ino))
        except OSError:
            continue
    return budget


def _names_in(root: Path, inodes: set[Inode], skip: set[str]) -> tuple[list[Path], bool]:
    numbers = {ino for _, ino in inodes}
    out: list[Path] = []
    seen = 0
    stack = [str(root)]
    while stack:
        d = stack.pop()
        if d in skip:  # a masked directory: hidden whole already
            continue
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            return out, True
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name not in SKIP_DIRS:
                    stack.append(e.path)
            elif e.inode() in numbers and e.path not in skip and _same(e.path, inodes):
                out.append(Path(e.path))
    return out, False


def _same(path: str, inodes: set[Inode]) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in inodes
