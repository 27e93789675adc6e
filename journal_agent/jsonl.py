"""Reading a JSON-lines file we append to: every line that is a JSON object, in order.

Standard library only: the Claude Code hooks import it (``python3 -I -S``).
"""

from __future__ import annotations

import json
from pathlib import Path


def read_objects(path: Path) -> list[dict]:
    """The file's JSON objects; a missing file is empty, and a line that is not a JSON object
    (torn by a crash, or edited by hand) is skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
