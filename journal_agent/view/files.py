"""The only way the view reads a workspace file to show it: confined and never a secret.

The path a request names goes through the tools' confinement (:func:`resolve_path`: ``..``,
absolute paths and symlinks that leave the workspace are refused), then the permission
policy's ``Read`` decision (the sandbox's secret rules, the user's ``Read(...)`` deny rules,
hard links to hidden files), and is opened with :func:`open_beneath`, so a symlink swapped in
after the check makes the read fail instead of leaving the workspace.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from journal_agent.tools.base import ToolError
from journal_agent.tools.confined_paths import open_beneath, resolve_path, workspace_root

MAX_BYTES = 2_000_000  # a larger file is shown as "too large", not streamed into a page


class Refused(Exception):
    """A path the view will not show; the message says why, in one sentence."""


class Missing(Refused):
    """A path inside the workspace that names no file to show (none there, or a directory)."""


@dataclass(frozen=True)
class Shown:
    rel: str  # posix path relative to the workspace root
    text: str


class WorkspaceFiles:
    """Reads files of one workspace for display; every refusal is a :class:`Refused`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.real_root = Path(workspace_root(self.root))

    @cached_property
    def _policy(self):  # built once: it reads the settings files
        from journal_agent.tools.permissions import PermissionPolicy

        return PermissionPolicy.from_settings(self.root)

    def resolve(self, rel: str) -> Path:
        """The real path of ``rel`` inside the workspace, allowed to be read, or Refused."""
        try:
            path = resolve_path(self.root, rel)
        except ToolError as exc:
            raise Refused(str(exc)) from None
        # Git's own files are not code anyone cites, and .git/config may hold a remote URL with
        # credentials in it (https://user:token@host/…), which the secret rules do not name.
        parts = (*Path(rel).parts, *path.relative_to(self.real_root).parts)
        if any(part.lower() == ".git" for part in parts):  # .GIT too, on a case-blind disk
            raise Refused(f"{rel} is not shown: git's own files are not shown")
        verdict = self._policy.evaluate("Read", path=path)
        if verdict.behavior != "allow":
            raise Refused(f"{rel} is not shown: {verdict.reason}")
        return path

    def relative(self, path: Path) -> str:
        return path.relative_to(self.real_root).as_posix()

    def readable(self, rel: str) -> str | None:
        """The workspace-relative path when ``rel`` is a file the view may show, else None."""
        try:
            path = self.resolve(rel)
        except Refused:
            return None
        return self.relative(path) if path.is_file() else None

    def read(self, rel: str) -> Shown:
        path = self.resolve(rel)
        try:
            fd = open_beneath(self.root, path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise Missing(f"{rel}: no such file in the workspace") from None
        except (OSError, ToolError) as exc:
            raise Refused(f"{rel} cannot be opened: {getattr(exc, 'strerror', exc)}") from None
        # Checked on the descriptor before it becomes a file object: os.fdopen refuses a
        # directory with an error of its own and leaves the descriptor open.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise Missing(f"{rel} is a directory; the view shows files")
            if not stat.S_ISREG(info.st_mode):
                raise Refused(f"{rel} is not a regular file")
            raise Refused(f"{rel} is {info.st_size:,} bytes; the view shows files up to 2 MB")
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if b"\x00" in data[:8192]:
            raise Refused(f"{rel} is a binary file")
        return Shown(self.relative(path), data.decode("utf-8", errors="replace"))


def text_reader(root: Path):
    """``read(rel) -> text | None``: a workspace file's text as the view shows it, None when it
    is refused (a secret, a denied or missing file, outside the workspace)."""
    files = WorkspaceFiles(root)

    def read(rel: str) -> str | None:
        try:
            return files.read(rel).text
        except Refused:
            return None

    return read
