"""Reading a JSON-lines file we append to: every line that is a JSON object, in order.

Standard library only, and light: the Claude Code hooks import it (``python3 -I -S``), so it
parses with :mod:`journal_agent.lightjson` and takes paths as ``str`` or ``Path``. The file is
read through :mod:`journal_agent.confined` from ``anchor`` (the workspace): a link, FIFO or
hard link where the file should be is ``confined.Refused``, never followed.
"""

from __future__ import annotations

import os

from journal_agent import confined
from journal_agent.lightjson import loads

TYPE_CHECKING = False  # (collections.abc is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import BinaryIO


def read_objects(anchor: str | os.PathLike[str], path: str | os.PathLike[str]) -> list[dict]:
    """The file's JSON objects; a missing file is empty, and a line that is not a JSON object
    (torn by a crash, or edited by hand) is skipped."""
    return [item for _, item in read_lines(anchor, path)]


def read_lines(
    anchor: str | os.PathLike[str], path: str | os.PathLike[str]
) -> Iterator[tuple[bytes, dict]]:
    """``read_objects`` one at a time, with each object's line as read: for a reader that
    keeps the lines and parses one again when it needs it (the parsed objects of a large
    file, all alive at once, left their memory behind in a long-lived process). The file is
    read a line at a time: memory bounded by its longest line, not its size."""
    f = confined.open_read(anchor, path)
    if f is None:
        return
    with f:
        for _, raw, item in _placed_lines(f):
            yield raw, item


def _placed_lines(f: BinaryIO) -> Iterator[tuple[int, bytes, dict]]:
    """``(offset, line, object)`` for each line of the open file ``f`` that is a JSON object;
    lines split as ``bytes.splitlines`` splits them (``\n``, ``\r\n`` or a lone ``\r``)."""
    offset = 0
    for chunk in f:  # up to each \n
        at = offset
        for raw in chunk.splitlines(keepends=True):
            line = raw.rstrip(b"\r\n")
            start, at = at, at + len(raw)
            try:
                item = loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                yield start, line, item
        offset += len(chunk)


class LatestLines:
    """The last line for each key of a JSON-lines file we append to, found in one pass and
    read again when asked: only each key's place (two ints) is kept, never the file.

    ``key_of(object)`` names a line's key, or None for a line that does not count. The file
    (opened through :mod:`journal_agent.confined`) stays open for the object's life
    (:meth:`close`): appends leave the places valid, and a file replaced by a rename is not
    this one — what is read is the version scanned.
    """

    def __init__(
        self,
        anchor: str | os.PathLike[str],
        path: str | os.PathLike[str],
        key_of: Callable[[dict], str | None],
    ) -> None:
        self._places: dict[str, tuple[int, int]] = {}
        self._file = confined.open_read(anchor, path)
        if self._file is None:
            return
        for start, line, item in _placed_lines(self._file):
            key = key_of(item)
            if key is not None:
                self._places[key] = (start, len(line))

    def keys(self) -> Iterator[str]:
        return iter(self._places)

    def __contains__(self, key: object) -> bool:
        return key in self._places

    def __len__(self) -> int:
        return len(self._places)

    def line(self, key: str) -> bytes:
        """The key's line (KeyError for a key the file does not have)."""
        start, size = self._places[key]
        assert self._file is not None, "a key was found, so the file was open"
        return os.pread(self._file.fileno(), size, start)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __del__(self) -> None:
        self.close()
