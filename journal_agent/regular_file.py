"""Reading a file that something we do not trust may have planted: ``read_regular``.

A sandboxed command or a model writes into folders we read back afterwards (``.journal/drafts/``,
the sandbox's outbox of records). There a name may be a symlink out of the workspace, a FIFO that
would block the reader, a folder (which ``open`` accepts and ``fdopen`` refuses with a
traceback), or a huge file. This reads such a name only when it is a regular file, never through
a symlink, never blocking, and never more than the caller's limit; anything else is ``None``, for
the caller to skip. Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_regular(path: Path, limit: int) -> bytes | None:
    """At most ``limit + 1`` bytes of ``path``, or None: a symlink, not a regular file, larger
    than ``limit`` when opened, or unreadable. More than ``limit`` bytes back means the file grew
    after it was opened; the caller decides whether to refuse or cut it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
