"""Reading a JSON-lines file we append to: every line that is a JSON object, in order.

Standard library only, and light: the Claude Code hooks import it (``python3 -I -S``), so it
parses with :mod:`journal_agent.lightjson` and takes a path as ``str`` or ``Path``.
"""

from __future__ import annotations

import os

from journal_agent.lightjson import loads


def read_objects(path: str | os.PathLike[str]) -> list[dict]:
    """The file's JSON objects; a missing file is empty, and a line that is not a JSON object
    (torn by a crash, or edited by hand) is skipped."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.splitlines():
        try:
            item = loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
