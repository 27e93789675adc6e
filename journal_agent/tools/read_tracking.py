"""Read tracking: what this run read, so Write and Edit can refuse to clobber newer content.

For each resolved path we keep a :class:`Fingerprint` of the file as this run last saw it:
the SHA-256 of its content when we hashed all of it, and always its stat identity (inode,
size, mtime, ctime). Write and Edit compare the file on disk against it under the file's
lock; any difference means someone else (another agent, the user's editor) changed it.

The hash is authoritative when present. It is absent only when a Read stopped early in a
file too large to hash cheaply; then the stat identity decides (a changed inode, size,
mtime or ctime means changed; ctime cannot be set from user space).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Fingerprint:
    sha256: str | None
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def from_stat(cls, st: os.stat_result, sha256: str | None) -> Fingerprint:
        return cls(sha256, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    @classmethod
    def of_bytes(cls, data: bytes, st: os.stat_result) -> Fingerprint:
        return cls.from_stat(st, hashlib.sha256(data).hexdigest())

    def same_stat(self, other: Fingerprint) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode) == (
            other.size,
            other.mtime_ns,
            other.ctime_ns,
            other.inode,
        )

    def matches(self, current: Fingerprint) -> bool:
        """Whether ``current`` (the file now) is the file this fingerprint was taken of."""
        if self.sha256 is not None and current.sha256 is not None:
            return self.sha256 == current.sha256
        return self.same_stat(current)


class ReadTracker:
    """Per-run record of the files read, keyed by resolved path. Safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[Path, Fingerprint] = {}

    def record(self, path: Path, fingerprint: Fingerprint) -> None:
        with self._lock:
            self._seen[path] = fingerprint

    def get(self, path: Path) -> Fingerprint | None:
        with self._lock:
            return self._seen.get(path)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._seen.pop(path, None)

    def __contains__(self, path: object) -> bool:
        with self._lock:
            return path in self._seen

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)


_attach_lock = threading.Lock()


class _HasReads(Protocol):
    """What :func:`tracker_for` needs of a ``ToolContext`` (named structurally: the tool
    contract names this module's class, so importing it here would be a circle)."""

    reads: ReadTracker | None


def tracker_for(ctx: _HasReads) -> ReadTracker:
    """The context's tracker, attaching a fresh one if the host gave none.

    A context without a tracker would make every existing file unwritable (nothing could
    ever have been read), so the run gets one on first use.
    """
    if ctx.reads is None:
        with _attach_lock:
            if ctx.reads is None:
                ctx.reads = ReadTracker()
    return ctx.reads
