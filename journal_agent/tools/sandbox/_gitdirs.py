"""Every git directory in a writable root whose config and hooks git would use outside the
sandbox, found before a writing call (to keep their files read-only) and again after it (to
judge what the call made of new ones).

From each ``.git`` — the workspace's own and those of nested repositories, which the secret
scan (:mod:`._hidden_files`) notes on its walk — the git directory it leads to (a directory, a
symlink resolved, a gitfile's ``gitdir:`` read) and, inside each, bounded:

- submodules' git directories, ``modules/<name>`` (a name may hold slashes, so ``modules`` is
  walked down to the directories holding a ``HEAD``), and theirs in turn (``modules/a/modules/b``);
- linked worktrees' administrative directories, ``worktrees/<name>``;
- the directory a ``commondir`` names (git takes config and hooks from it).

In each, :data:`GIT_FILES` are what git reads to decide what to run or where to write: kept
read-only when they exist, guarded (moved aside if the call creates them, see :mod:`.guard`)
when not. A workspace without submodules or worktrees costs three failed ``open``/``scandir``
calls per repository.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from journal_agent.tools.protected import GIT_FILES

__all__ = ["GIT_FILES", "GitDirs", "Pointer", "find", "first_line", "pointer", "resolve"]
MAX_GIT_DIRS = 256  # git directories protected per call; more are left as they are (documented)
_MAX_VISITS = 4096  # directories looked at under modules/ and worktrees/, per call
_MAX_POINTER = 4096  # bytes of a gitfile or commondir read


@dataclass(frozen=True)
class Pointer:
    """A ``.git`` that leads elsewhere: a symlink (``target`` its link) or a gitfile (its
    ``gitdir:``)."""

    path: Path
    kind: str  # "symlink" | "gitfile"
    target: str


@dataclass(frozen=True)
class GitDirs:
    dirs: frozenset[Path]  # real paths of git directories inside the writable roots
    pointers: tuple[Pointer, ...]  # the .git symlinks and gitfiles leading to them
    truncated: bool = False


def find(dot_gits: Iterable[Path], writable: Iterable[Path]) -> GitDirs:
    """The git directories inside ``writable`` that ``dot_gits`` lead to, with their
    submodules', worktrees' and common directories."""
    roots = tuple(writable)
    pointers = [p for d in dot_gits if (p := pointer(d)) is not None]
    queue = [g for d in dot_gits if (g := resolve(d)) is not None]
    found: dict[Path, None] = {}
    budget = _MAX_VISITS
    while queue and len(found) < MAX_GIT_DIRS and budget > 0:
        g = queue.pop()
        if g in found or not _inside(g, roots):
            continue
        found[g] = None
        common = first_line(g / "commondir")
        if common is not None:
            queue.append(Path(os.path.realpath(g / common)))
        budget = _gitdirs_under(g / "worktrees", queue, budget, depth=1)
        budget = _gitdirs_under(g / "modules", queue, budget, depth=64)
    return GitDirs(frozenset(found), tuple(pointers), truncated=bool(queue))


def resolve(dot_git: Path) -> Path | None:
    """The git directory a ``.git`` leads to (real path), or None."""
    try:
        st = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        target = _gitfile_target(dot_git)
        if target is None:
            return None
        real = Path(os.path.realpath(dot_git.parent / target))
    else:
        real = Path(os.path.realpath(dot_git))
    return real if real.is_dir() else None


def pointer(dot_git: Path) -> Pointer | None:
    try:
        st = os.lstat(dot_git)
        if stat.S_ISLNK(st.st_mode):
            return Pointer(dot_git, "symlink", os.readlink(dot_git))
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return Pointer(dot_git, "gitfile", _gitfile_target(dot_git) or "")
    return None


def _gitfile_target(path: Path) -> str | None:
    text = first_line(path)
    if text is None or not text.startswith("gitdir:"):
        return None
    return text[len("gitdir:") :].strip() or None


def first_line(path: Path) -> str | None:
    """The first line of a small regular file (a gitfile, a commondir), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_POINTER)
    except OSError:
        return None
    finally:
        os.close(fd)
    line = data.decode("utf-8", "replace").splitlines()
    return line[0].strip() if line and line[0].strip() else None


def _gitdirs_under(top: Path, queue: list[Path], budget: int, depth: int) -> int:
    """Queue the git directories (holding a ``HEAD``) below ``top``; directories that are not
    one are names with slashes and are walked down (up to ``depth`` levels)."""
    stack = [(str(top), 0)]
    while stack and budget > 0:
        d, level = stack.pop()
        try:
            with os.scandir(d) as it:
                subdirs = [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        budget -= len(subdirs) + 1
        for sub in subdirs:
            if os.path.lexists(os.path.join(sub, "HEAD")):
                queue.append(Path(os.path.realpath(sub)))
            elif level + 1 < depth:
                stack.append((sub, level + 1))
    return budget


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or r in path.parents for r in roots)
