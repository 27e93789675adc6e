"""The one way journal-agent holds a file lock under ``.journal/locks``: wait up to a timeout,
then fail with a sentence that says who holds it and what to do."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from journal_agent.errors import UserError

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def held(
    lock_file: Path, timeout: float, busy: str, error: type[Exception] = UserError
) -> Iterator[None]:
    """Hold ``lock_file`` (created with its directory; kept on release, so it is reused rather
    than churned); raise ``error(busy)`` if it stays taken for ``timeout`` s (a tool passes
    ``ToolError``, so the model gets the sentence as an error result)."""
    from filelock import FileLock, Timeout

    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file), timeout=timeout, preserve_lock_file=True)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        # `--verbose` shows why a command seems to hang.
        logger.debug("waiting for %s, held by another process", lock_file)
        try:
            lock.acquire()
        except Timeout:
            raise error(busy) from None
    try:
        yield
    finally:
        lock.release()
