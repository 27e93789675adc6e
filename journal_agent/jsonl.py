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
    from collections.abc import Iterator


def read_objects(anchor: str | os.PathLike[str], path: str | os.PathLike[str]) -> list[dict]:
    """The file's JSON objects; a missing file is empty, and a line that is not a JSON object
    (torn by a crash, or edited by hand) is skipped."""
    return [item for _, item in read_lines(anchor, path)]


def read_lines(
    anchor: str | os.PathLike[str], path: str | os.PathLike[str]
) -> Iterator[tuple[bytes, dict]]:
    """``read_objects`` one at a time, with each object's line as read: for a reader that
    keeps the lines and parses one again when it needs it (the parsed objects of a large
    file, all alive at once, left their memory behind in a long-lived process)."""
    data = confined.read(anchor, path)
    if data is None:
        return
    for raw in data.splitlines():
        try:
            item = loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict):
            yield raw, item
