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
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from journal_agent.tools.sandbox._gitfiles import only_sample_hooks, unsafe_config_keys
from journal_agent.tools.sandbox.view import View

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
    """Move what the call created of ``before`` into quarantine; one sentence per path."""
    moves: dict[Path, str] = {}
    for a in before:
        if not os.path.lexists(a.first):
            continue
        if a.first != a.path and _redirects(a.first):
            moves[a.first] = _WHY.get(_rel(view, a.first), f"it leads {_rel(view, a.path)} "
                                      "to a place of the command's choosing")  # fmt: skip
        elif os.path.lexists(a.path) and (why := _verdict(view, a.path)) is not None:
            moves[a.path] = why
    # A moved directory takes what it holds with it.
    moves = {p: w for p, w in moves.items() if not any(q in moves for q in p.parents)}
    if not moves:
        return []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        dest_dir = _quarantine_dir(view.root, stamp)
    except OSError as exc:
        return [_unmoved(view, p, why, exc) for p, why in moves.items()]
    return [_move(view, p, why, dest_dir) for p, why in moves.items()]


def _redirects(component: Path) -> bool:
    """A new ancestor that sends the protected path elsewhere: a symlink, or a gitfile
    (``.git`` as a file holding ``gitdir: <path>``)."""
    return component.is_symlink() or (component.name == ".git" and not component.is_dir())


def _verdict(view: View, path: Path) -> str | None:
    """Why ``path`` (created by the call) must go, or None when it is harmless."""
    rel = _rel(view, path)
    if rel == ".git/hooks":
        return None if only_sample_hooks(path) else _WHY[rel]
    if rel == ".git/config":
        keys = unsafe_config_keys(path)
        if not keys:
            return None
        more = " …" if len(keys) > 4 else ""
        return (
            f"it sets {', '.join(keys[:4])}{more}, which git never writes on its own and which "
            "could make git run a command outside the sandbox"
        )
    return _WHY.get(rel, _DENY_WRITE)


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
