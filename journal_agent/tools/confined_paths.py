"""Workspace confinement: every path a tool touches resolves inside the workspace root.

We resolve paths ourselves, one component at a time, instead of trusting
``os.path.realpath``: we need to follow symlinks of components that exist (including chains
and dangling links, which a later write would follow), treat components that do not exist
yet lexically (Write creates files and directories), and detect symlink loops explicitly
(``realpath`` in non-strict mode silently returns a loop unresolved).

The result is the real path with no symlinks in it. The tools then open it with
:func:`open_beneath`, walking from the root one directory at a time with ``O_NOFOLLOW``, so a
symlink swapped in after the check (at any component) makes the call fail instead of
redirecting it outside.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent.tools.base import ToolError
from profiling._nofollow import DIR, walk_to

if TYPE_CHECKING:
    from journal_agent.tools.base import ToolContext

# Linux gives up after 40 symlink hops (ELOOP); so do we.
MAX_SYMLINK_HOPS = 40


def resolve_path(root: Path, file_path: str) -> Path:
    """Resolve ``file_path`` (absolute, ``~``-prefixed or relative to ``root``) inside ``root``.

    Returns the real path (symlinks of existing components followed). Raises
    :class:`ToolError` with a message for the model when the path is malformed or leads
    outside the workspace by any route (``..``, an absolute path elsewhere, a symlink).
    """
    if not isinstance(file_path, str) or not file_path.strip():
        raise ToolError("The path is empty; give a file path inside the workspace.")
    if "\x00" in file_path:
        raise ToolError(f"The path {file_path!r} contains a NUL byte; give a plain file path.")
    try:
        file_path.encode(_fs_encoding(), "surrogateescape")
    except UnicodeEncodeError:
        raise ToolError(
            f"The path {file_path!r} is not a valid file name here; give a plain file path."
        ) from None

    root_real = workspace_root(root)
    expanded = os.path.expanduser(file_path) if file_path.startswith("~") else file_path
    joined = os.path.join(root_real, expanded)  # an absolute ``expanded`` replaces root_real
    real = _real_path(joined, file_path)
    if _is_inside(real, root_real):
        return Path(real)

    lexical = os.path.normpath(joined)
    if _is_inside(lexical, root_real):
        raise ToolError(
            f"{file_path} leads through a symlink to {real}, which is outside the workspace "
            f"root {root_real}; use a path inside it."
        )
    raise ToolError(f"{file_path} is outside the workspace root {root_real}; use a path inside it.")


def workspace_root(root: Path) -> str:
    """The real path of the workspace root (itself possibly reached through a symlink)."""
    return _real_path(os.path.abspath(root), str(root))


def _is_inside(path: str, root_real: str) -> bool:
    if root_real == os.sep:
        return path.startswith(os.sep)
    return path == root_real or path.startswith(root_real + os.sep)


def _fs_encoding() -> str:
    return sys.getfilesystemencoding()


def _real_path(absolute: str, shown: str) -> str:
    """Follow symlinks component by component; components that do not exist stay lexical."""
    pending = absolute.split(os.sep)[::-1]  # a stack: next component on top
    resolved = os.sep
    hops = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        try:
            mode = os.lstat(candidate).st_mode
        except FileNotFoundError:
            resolved = candidate  # not there yet: the rest is lexical too
            continue
        except NotADirectoryError:
            raise ToolError(
                f"{shown} goes through {resolved}, which is a file, not a directory."
            ) from None
        except OSError as exc:
            raise ToolError(f"Cannot resolve {shown}: {exc.strerror}.") from None
        if not stat.S_ISLNK(mode):
            resolved = candidate
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            raise ToolError(f"{shown} goes through a symlink loop; use a path without it.")
        try:
            target = os.readlink(candidate)
        except OSError as exc:
            raise ToolError(f"Cannot resolve {shown}: {exc.strerror}.") from None
        if os.path.isabs(target):
            resolved = os.sep
        pending.extend(target.split(os.sep)[::-1])
    return resolved


def permitted_path(ctx: ToolContext, tool_name: str, file_path: str) -> Path:
    """Resolve ``file_path`` inside ``ctx.root`` and check ``ctx.policy`` for ``tool_name``.

    The one entry point file tools use: a path outside the workspace or a denied call raises
    :class:`ToolError`. Without a policy (a library caller that set none) the call is allowed.
    """
    path = resolve_path(ctx.root, file_path)
    if ctx.policy is not None:
        ctx.policy.ensure(tool_name, path=path)
    return path


def open_dir_beneath(root: Path, directory: Path, *, create: bool = False) -> int:
    """A descriptor for ``directory`` (a resolved path inside ``root``), reached from the root
    without following any symlink; with ``create``, missing directories are made on the way.

    Raises :class:`OSError` (``ELOOP``, ``ENOTDIR``, ``ENOENT``...) if the tree changed since
    the path was resolved; the caller closes the descriptor.
    """
    root_real = workspace_root(root)
    rel = os.path.relpath(directory, root_real)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise ToolError(f"{directory} is outside the workspace root {root_real}.")
    if rel == os.curdir:
        return os.open(root_real, DIR)
    return walk_to(
        root_real, rel.split(os.sep), create=create, refuse=lambda *_: None, follow_anchor=False
    )


def open_beneath(root: Path, path: Path, flags: int, mode: int = 0o666) -> int:
    """``os.open`` of a resolved ``path`` inside ``root`` that follows no symlink on the way."""
    if str(path) == workspace_root(root):
        return os.open(path, flags | os.O_CLOEXEC)
    dir_fd = open_dir_beneath(root, path.parent)
    try:
        return os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
