"""The one way journal-agent holds a file lock under ``.journal/``: wait up to a timeout, then
fail with a sentence that says who holds it and what to do.

The lock file is opened through :mod:`journal_agent.confined` (never through a link, never
truncated: a committed ``.journal/locks/review.lock -> ~/.bashrc`` is refused with a sentence
instead of emptying the file it names) and locked with ``flock``, the lock ``filelock`` takes on
Unix, so a process holding it through ``filelock`` still excludes us and the reverse.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from journal_agent.errors import UserError
from journal_agent.paths import anchor_of

logger = logging.getLogger(__name__)

POLL_S = 0.05  # how often a waiter tries again (filelock's default too)


@contextlib.contextmanager
def held(
    lock_file: Path,
    timeout: float,
    busy: str,
    error: type[Exception] = UserError,
    *,
    anchor: Path | None = None,
) -> Iterator[None]:
    """Hold ``lock_file`` (created with its folders; kept on release, so it is reused rather
    than churned); raise ``error(busy)`` if it stays taken for ``timeout`` s (a tool passes
    ``ToolError``, so the model gets the sentence as an error result). ``anchor``: the folder
    trusted as given (default: the workspace above ``.journal/``); below it no link is
    followed (``confined.Refused``)."""
    import fcntl

    from journal_agent import confined

    fd = confined.open_lock(anchor or anchor_of(lock_file), lock_file)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # `--verbose` shows why a command seems to hang.
            logger.debug("waiting for %s, held by another process", lock_file)
            _wait(fd, timeout, error, busy)
        yield
    finally:
        os.close(fd)  # (closing the descriptor releases the lock)


def _wait(fd: int, timeout: float, error: type[Exception], busy: str) -> None:
    import fcntl

    deadline = time.monotonic() + timeout
    while True:
        time.sleep(POLL_S)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise error(busy) from None
