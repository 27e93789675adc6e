"""Protected paths a writing command created are moved into quarantine after the call.

A protected path that exists is mounted read-only; one that does not exist cannot be (a mount
needs something to mount on), so a writing command could create it and have it act outside
the sandbox later: ``.mcp.json`` (an MCP server Claude Code starts), ``.claude-plugin/``,
``.git/hooks/pre-commit`` or a ``.git/config`` with ``core.fsmonitor`` in a workspace that is
not a repository yet, a ``.git`` symlink or gitfile that points git at a repository of the
command's choosing, a ``sandbox.filesystem.denyWrite`` path.

So, before a writing call, :func:`absent` notes which of :attr:`View.guarded` do not exist
and where their path first breaks off (``.git`` itself, when there is no repository). After
the call — its PID namespace has ended with it, so nothing of it is left to race us —
:func:`settle` moves every one the call created to ``.journal/quarantine/<UTC time>/<path>``
(never deleted: it may be the user's work) and returns one sentence per path for the result.

``git init`` stays useful: a new ``.git/hooks`` holding only ``*.sample`` files and a new
``.git/config`` holding only keys git writes itself stay where they are (see :mod:`._gitfiles`).

The same verdicts apply to every git directory (:mod:`._gitdirs`): the missing files of those
that existed before the call, and all of those the call made — a submodule's
``.git/modules/<name>`` (``git submodule update``), a linked worktree's
``.git/worktrees/<name>`` (``git worktree add``), a repository cloned or initialised in a
subdirectory (found by walking the workspace again; an unchanged directory costs a ``stat``).
The new repository itself stays; only what would run a command outside the sandbox goes.
A ``.git`` symlink the call replaced is moved aside and the original link put back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from journal_agent.tools.sandbox import _gitdirs
from journal_agent.tools.sandbox._gitfiles import (
    harmless_commondir,
    harmless_gitdir,
    only_sample_hooks,
    unsafe_config_keys,
)
from journal_agent.tools.sandbox.view import View, dot_gits_of

QUARANTINE = Path(".journal/quarantine")

# What each protected path would have done outside the sandbox.
_WHY = {
    ".mcp.json": "Claude Code would start the MCP servers it lists, outside the sandbox",
    ".claude-plugin": "Claude Code would load it as a plugin, whose hooks and MCP servers run "
    "outside the sandbox",
    ".git/hooks": "git would run the hooks in it outside the sandbox (at a commit, checkout "
    "or merge)",
    ".git/commondir": "git would take its config and hooks from the directory it names, "
    "outside the sandbox",
    ".git": "it points git at a repository of the command's choosing, whose config and hooks "
    "git would use outside the sandbox",
    "gitdir": "`git worktree repair` and `prune` would write to or delete the place it names, "
    "outside the sandbox",
    ".claude": "Claude Code reads settings, hooks and agents from it",
    ".journal": "journal-agent reads its settings from it",
    ".journal/settings.json": "journal-agent would read permissions from it",
}
_DENY_WRITE = "sandbox.filesystem.denyWrite keeps it read-only"


@dataclass(frozen=True)
class Absent:
    path: Path  # a protected path that did not exist before the call
    first: Path  # its first component that did not exist (the path itself, or e.g. .git)


def absent(view: View) -> list[Absent]:
    """The guarded paths that do not exist now (before the call), component by component."""
    out = []
    for path in view.guarded:
        base = max((w for w in view.writable if w == path or w in path.parents), key=_depth)
        cur = base
        for part in path.relative_to(base).parts:
            cur = cur / part
            if not os.path.lexists(cur):
                out.append(Absent(path, cur))
                break
    return out


def settle(view: View, before: list[Absent]) -> list[str]:
    """Move what the call created of ``before``, and what would run a command in the git
    directories it made, into quarantine; one sentence per path."""
    moves: dict[Path, str] = {}
    for a in before:
        if not os.path.lexists(a.first):
            continue
        if a.first != a.path and _redirects(a.first):
            moves[a.first] = _WHY.get(_rel(view, a.first), f"it leads {_rel(view, a.path)} "
                                      "to a place of the command's choosing")  # fmt: skip
        elif os.path.lexists(a.path) and (why := _verdict(view, a.path)) is not None:
            moves[a.path] = why
    restore = _replaced_symlink(view, moves)
    _replaced_read_only(view, moves)
    _judge_new_git_dirs(view, moves)
    # A moved directory takes what it holds with it.
    moves = {p: w for p, w in moves.items() if not any(q in moves for q in p.parents)}
    if not moves:
        return []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        dest_dir = _quarantine_dir(view.root, stamp)
    except OSError as exc:
        return [_unmoved(view, p, why, exc) for p, why in moves.items()]
    said = [_move(view, p, why, dest_dir) for p, why in moves.items()]
    if restore is not None and not os.path.lexists(restore.path):
        with contextlib.suppress(OSError):
            os.symlink(restore.target, restore.path)
            said.append(f"Put back {_rel(view, restore.path)} as the symlink to "
                        f"{restore.target} it was before the command.")  # fmt: skip
    return said


def _replaced_symlink(view: View, moves: dict[Path, str]) -> _gitdirs.Pointer | None:
    """The workspace's ``.git`` symlink, when the call replaced it by another symlink or a
    gitfile (a git directory of its own is judged as a new one): noted in ``moves``."""
    dot_git = view.root / ".git"
    old = next((p for p in view.git.pointers if p.path == dot_git), None) if view.git else None
    if old is None or old.kind != "symlink":
        return None
    new = _gitdirs.pointer(dot_git)
    if new is None or new == old:
        return None
    moves[dot_git] = _WHY[".git"]
    return old


def _replaced_read_only(view: View, moves: dict[Path, str]) -> None:
    """Read-only paths that are another file now: the call renamed a directory above one
    (``mv .git old``, the mount goes with it) and made a new one in its place."""
    for path, before in zip(view.read_only, view.read_only_ids, strict=True):
        try:
            st = os.lstat(path)
        except OSError:
            continue  # renamed away, nothing in its place
        if (st.st_dev, st.st_ino) == before or path in moves:
            continue
        rel = _rel(view, path)
        if path in view.git_files or rel in _TOP_GIT_FILES:
            why = _git_verdict(path)
        else:
            why = f"it took the place of the read-only {rel} (the directory above was renamed)"
        if why is not None:
            moves[path] = why


def _judge_new_git_dirs(view: View, moves: dict[Path, str]) -> None:
    """The files of every git directory the call made that would run a command, into
    ``moves``: the repository stays, usable."""
    if view.git is None or view.scan is None:
        return
    view.scan.paths()  # again: nested repositories made by the call (changed directories only)
    dot_gits = [p for p in dot_gits_of(view.root, view.scan.repos) if p not in moves]
    dirs = _gitdirs.find(dot_gits, view.writable).dirs
    for g in sorted(dirs - view.git.dirs):
        for name in _gitdirs.GIT_FILES:
            path = g / name
            if path not in moves and os.path.lexists(path):
                why = _git_verdict(path)
                if why is not None:
                    moves[path] = why


def _redirects(component: Path) -> bool:
    """A new ancestor that sends the protected path elsewhere: a symlink, or a gitfile
    (``.git`` as a file holding ``gitdir: <path>``)."""
    return component.is_symlink() or (component.name == ".git" and not component.is_dir())


def _verdict(view: View, path: Path) -> str | None:
    """Why ``path`` (created by the call) must go, or None when it is harmless."""
    rel = _rel(view, path)
    if path in view.git_files or rel in _TOP_GIT_FILES:
        return _git_verdict(path)
    return _WHY.get(rel, _DENY_WRITE)


_TOP_GIT_FILES = {f".git/{name}" for name in _gitdirs.GIT_FILES}


def _git_verdict(path: Path) -> str | None:
    """Why a file of a git directory (created by the call) must go, or None."""
    name = path.name
    if name == "hooks":
        return None if only_sample_hooks(path) else _WHY[".git/hooks"]
    if name == "commondir":
        return None if harmless_commondir(path) else _WHY[".git/commondir"]
    if name == "gitdir":
        return None if harmless_gitdir(path) else _WHY["gitdir"]
    keys = unsafe_config_keys(path, Path(os.path.realpath(path.parent)))
    if not keys:
        return None
    more = " …" if len(keys) > 4 else ""
    return (
        f"it sets {', '.join(keys[:4])}{more}, which git never writes on its own and which "
        "could make git run a command outside the sandbox"
    )


def _quarantine_dir(root: Path, stamp: str) -> Path:
    """A new ``.journal/quarantine/<stamp>[-n]``, every component a real directory."""
    parent = root / QUARANTINE
    parent.mkdir(parents=True, exist_ok=True)
    for p in (root / ".journal", parent):
        if p.is_symlink() or not p.is_dir():
            raise NotADirectoryError(f"{p} is not a directory")
    for n in range(1, 1000):
        dest = parent / (stamp if n == 1 else f"{stamp}-{n}")
        with contextlib.suppress(FileExistsError):
            dest.mkdir()
            return dest
    raise FileExistsError(f"{parent / stamp} exists")


def _move(view: View, path: Path, why: str, dest_dir: Path) -> str:
    dest = dest_dir / _rel(view, path)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path, dest)
        except OSError:  # another file system (an allowWrite path): copy, then remove
            shutil.move(path, dest)
    except OSError as exc:
        return _unmoved(view, path, why, exc)
    return (
        f"Moved {_rel(view, path)}, which this command created, to "
        f"{dest.relative_to(view.root)} because {why}; review it and, if you trust it, move it "
        "back yourself."
    )


def _unmoved(view: View, path: Path, why: str, exc: OSError) -> str:
    return (
        f"This command created {_rel(view, path)}, which could not be moved into quarantine "
        f"({exc.strerror or exc}), and {why}: review it and remove it yourself before running "
        "git or Claude Code here."
    )


def _rel(view: View, path: Path) -> str:
    """Relative to the workspace; a path elsewhere (an allowWrite directory) keeps its full
    path under ``_outside/`` in the quarantine."""
    try:
        return path.relative_to(view.root).as_posix()
    except ValueError:
        return "_outside" + path.as_posix()


def _depth(p: Path) -> int:
    return len(p.parts)
