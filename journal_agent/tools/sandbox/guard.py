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

The quarantine never follows a link the call made: a directory above a protected path that
the call turned into a symlink (``mv .git .git_old && ln -s ~/.kube .git``) or a ``.git``
directory it replaced by a gitfile is itself the protected change, and *it* is moved — the
link, never what it leads to, which is neither read nor touched. Every move is a
``rename`` between directory descriptors opened from the writable root with ``O_NOFOLLOW``
(:func:`journal_agent.tools.confined_paths.open_dir_beneath`), so nothing outside the writable
roots is ever moved. The reasons given are those of the one protected list
(:mod:`journal_agent.tools.protected`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from journal_agent.tools import protected
from journal_agent.tools.confined_paths import open_dir_beneath
from journal_agent.tools.sandbox import _gitdirs
from journal_agent.tools.sandbox._gitfiles import (
    harmless_commondir,
    harmless_gitdir,
    only_sample_hooks,
    unsafe_config_keys,
)
from journal_agent.tools.sandbox.view import (
    View,
    dot_gits_of,
    kind_of,
    why_protected,
    writable_base,
)

QUARANTINE = Path(".journal/quarantine")


@dataclass(frozen=True)
class Absent:
    path: Path  # a protected path that did not exist before the call
    first: Path  # its first component that did not exist (the path itself, or e.g. .git)


@dataclass(frozen=True)
class _Place:
    """Where a path is after the call, judged without following any link the call made."""

    parent: Path | None  # the real directory holding it, inside a writable root; None: gone
    redirect: Path | None = None  # a directory above it that the call made a symlink/gitfile


def absent(view: View) -> list[Absent]:
    """The guarded paths that do not exist now (before the call), component by component."""
    out = []
    for path in view.guarded:
        base = writable_base(path, view.writable)
        assert base is not None  # guarded paths lie in the writable roots
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
        place = _place(view, a.first)
        if _redirected(view, place, moves) or place.parent is None:
            continue
        first = place.parent / a.first.name
        if kind_of(first) is None:
            continue
        if a.first != a.path and _redirects(first):
            moves[a.first] = protected.GIT_WHY[".git"] if a.first.name == ".git" else (
                f"it leads {_rel(view, a.path)} to a place of the command's choosing")  # fmt: skip
            continue
        at = _place(view, a.path)
        if _redirected(view, at, moves) or at.parent is None:
            continue
        real = at.parent / a.path.name
        if kind_of(real) is not None and (why := _verdict(view, a.path, real)) is not None:
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


def _place(view: View, path: Path) -> _Place:
    """The real directory ``path`` lies in now, walking down from its writable root: a
    symlink that was there before the call, unchanged, is followed (it must stay inside the
    writable roots); one the call made or changed — or a ``.git`` directory the call replaced
    by a gitfile — redirects the path, and nothing beyond it is looked at."""
    base = writable_base(path, view.writable)
    if base is None:
        return _Place(None)
    real, lexical = base, base
    for part in path.parent.relative_to(base).parts:
        lexical, nxt = lexical / part, real / part
        now, was = kind_of(nxt), view.ancestors.get(lexical)
        if now is None:
            return _Place(None)
        if now.startswith("l:"):
            if now != was:
                return _Place(None, lexical)
            real = Path(os.path.realpath(nxt))
            if writable_base(real, view.writable) is None:
                return _Place(None)  # it led outside before the call too: not ours to judge
        elif now == "f":
            return _Place(None, lexical if part == ".git" and was in (None, "d") else None)
        else:
            real = nxt
    return _Place(real)


def _redirected(view: View, place: _Place, moves: dict[Path, str]) -> bool:
    """Note a redirecting directory in ``moves`` (the link or gitfile itself is moved, never
    what it leads to); True when there was one."""
    if place.redirect is None:
        return False
    if place.redirect not in moves:
        moves[place.redirect] = (
            protected.GIT_WHY[".git"]
            if place.redirect.name == ".git"
            else f"it leads the protected paths below {_rel(view, place.redirect)} to a place "
            "of the command's choosing"
        )
    return True


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
    moves[dot_git] = protected.GIT_WHY[".git"]
    return old


def _replaced_read_only(view: View, moves: dict[Path, str]) -> None:
    """Read-only paths that are another file now: the call renamed a directory above one
    (``mv .git old``, the mount goes with it) and made a new one in its place — or a link
    that leads the path elsewhere, which is moved itself (never what it leads to)."""
    for path, before in zip(view.read_only, view.read_only_ids, strict=True):
        place = _place(view, path)
        if _redirected(view, place, moves) or place.parent is None or path in moves:
            continue
        real = place.parent / path.name
        try:
            st = os.lstat(real)
        except OSError:
            continue  # renamed away, nothing in its place
        if (st.st_dev, st.st_ino) == before:
            continue
        if _is_git_file(view, path):
            why = _git_verdict(view, real)
        else:
            rel = _rel(view, path)
            why = f"it took the place of the read-only {rel} (the directory above was renamed)"
        if why is not None:
            moves[path] = why


def _judge_new_git_dirs(view: View, moves: dict[Path, str]) -> None:
    """The files of every git directory the call made that would run a command, into
    ``moves``: the repository stays, usable. (They are real paths inside the writable roots:
    :func:`_gitdirs.find` keeps no other.)"""
    if view.git is None or view.scan is None:
        return
    view.scan.paths()  # again: nested repositories made by the call (changed directories only)
    dot_gits = [p for p in dot_gits_of(view.root, view.scan.repos) if p not in moves]
    dirs = _gitdirs.find(dot_gits, view.writable).dirs
    for g in sorted(dirs - view.git.dirs):
        if any(m == g or m in g.parents for m in moves):
            continue
        for name in protected.GIT_FILES:
            path = g / name
            if path not in moves and os.path.lexists(path):
                why = _git_verdict(view, path)
                if why is not None:
                    moves[path] = why


def _redirects(component: Path) -> bool:
    """A new ancestor that sends the protected path elsewhere: a symlink, or a gitfile
    (``.git`` as a file holding ``gitdir: <path>``)."""
    return component.is_symlink() or (component.name == ".git" and not component.is_dir())


def _is_git_file(view: View, path: Path) -> bool:
    return path in view.git_files or _rel(view, path) in _TOP_GIT_FILES


def _verdict(view: View, path: Path, real: Path) -> str | None:
    """Why ``path`` (created by the call; ``real`` where it lies) must go, or None when it is
    harmless."""
    if _is_git_file(view, path):
        return _git_verdict(view, real)
    return why_protected(view.root, path) or protected.DENY_WRITE_WHY


_TOP_GIT_FILES = {f".git/{name}" for name in protected.GIT_FILES}


def _git_verdict(view: View, path: Path) -> str | None:
    """Why a file of a git directory (created by the call) must go, or None. ``path`` is a
    real path inside the writable roots; what it names elsewhere is never read."""
    name, roots = path.name, view.writable
    if name == "hooks":
        return None if only_sample_hooks(path) else protected.GIT_WHY["hooks"]
    if name == "commondir":
        return None if harmless_commondir(path) else protected.GIT_WHY["commondir"]
    if name == "gitdir":
        return None if harmless_gitdir(path, roots) else protected.GIT_WHY["gitdir"]
    keys = unsafe_config_keys(path, Path(os.path.realpath(path.parent)), roots)
    if not keys:
        return None
    more = " …" if len(keys) > 4 else ""
    return (
        f"it sets {', '.join(keys[:4])}{more}, which git never writes on its own and which "
        "could make git run a command outside the sandbox"
    )


def _quarantine_dir(root: Path, stamp: str) -> Path:
    """A new ``.journal/quarantine/<stamp>[-n]``, every component a real directory (made and
    opened from the workspace root without following a link)."""
    os.close(open_dir_beneath(root, root / QUARANTINE, create=True))
    for n in range(1, 1000):
        dest = root / QUARANTINE / (stamp if n == 1 else f"{stamp}-{n}")
        fd = open_dir_beneath(root, dest.parent)
        try:
            os.mkdir(dest.name, 0o700, dir_fd=fd)
            return dest
        except FileExistsError:
            continue
        finally:
            os.close(fd)
    raise FileExistsError(f"{root / QUARANTINE / stamp} exists")


def _move(view: View, path: Path, why: str, dest_dir: Path) -> str:
    """Rename ``path`` (the link itself, when it is one) into ``dest_dir``, relative to
    directory descriptors reached without following any link: nothing outside the writable
    roots is ever moved."""
    dest = dest_dir / _rel(view, path)
    place = _place(view, path)
    if place.parent is None:
        return _unmoved(view, path, why, OSError(errno.ENOENT, "it is no longer there"))
    base = writable_base(place.parent, view.writable)
    assert base is not None, "_place walks down from a writable root and stays within them"
    try:
        src_fd = open_dir_beneath(base, place.parent)
        try:
            dst_fd = open_dir_beneath(view.root, dest.parent, create=True)
            try:
                os.rename(path.name, dest.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)
    except OSError as exc:  # EXDEV: an allowWrite path on another file system
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
