"""Which files a run changed: a cheap (mtime, size) snapshot of the workspace before and after.

It sees changes made by any tool, Bash included. Large trees are not walked past
``MAX_FILES``; then only paths the file tools reported are used.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_FILES = 20_000
_SKIP_DIRS = {
    ".git",
    ".journal",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    "build",
    "dist",
}

Snapshot = dict[str, tuple[int, int]] | None


def snapshot(root: Path) -> Snapshot:
    out: dict[str, tuple[int, int]] = {}
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS:
                        stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out[os.path.relpath(entry.path, root)] = (st.st_mtime_ns, st.st_size)
                    if len(out) > MAX_FILES:
                        return None
            except OSError:
                continue
    return out


def changed(before: Snapshot, after: Snapshot) -> list[str] | None:
    if before is None or after is None:
        return None
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
