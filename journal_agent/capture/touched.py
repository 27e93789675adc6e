"""What one tool call touched, as PostToolUse gives it (capture/touch.py names the entries that
explain it): a Read's window, the lines an edit changed, a Grep's hits.

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

import os

from journal_agent import confined

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    # (path in the workspace, line ranges touched or None for the whole file, edited, read:
    # the ranges are what a Read showed, so an entry must be a share of them)
    Touched = tuple[str, list[tuple[int, int]] | None, bool, bool]

# A Grep that found more lines than this is a survey of many places, not a look at one
# (benchmarks/bench_touch_replay.py, docs/plugin.md): it names nothing.
GREP_FOCUS = 10
MAX_EDITED = 8 << 20  # bytes of a file read to find where an edit's new text landed


def relative(root: str, path: object) -> str | None:
    """A tool's ``file_path`` as a path in the workspace, or None when it is outside."""
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
    base = os.path.normpath(root)
    if not full.startswith(base + os.sep):
        return None
    return full[len(base) + 1 :].replace(os.sep, "/")


def touched(root: str, payload: dict[str, object]) -> list[Touched]:
    """``[(path, line ranges or None for the whole file, edited)]`` of one tool call."""
    tool = payload.get("tool_name")
    given = payload.get("tool_input")
    result = payload.get("tool_response")
    given = given if isinstance(given, dict) else {}
    result = result if isinstance(result, dict) else {}
    if tool == "Grep":
        return _grep_hits(root, result)
    rel = relative(root, given.get("file_path") or result.get("filePath"))
    if rel is None:
        return []
    if tool == "Read":
        offset, limit = given.get("offset"), given.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            first = offset if isinstance(offset, int) and offset > 0 else 1
            count = limit if isinstance(limit, int) and limit > 0 else 2000
            return [(rel, [(first, first + count - 1)], False, True)]
        return [(rel, None, False, True)]  # the whole file: its lines are counted when needed
    if tool in ("Edit", "MultiEdit", "Write"):
        # Claude Code gives the hunks; our runtime's Edit only its input.
        return [(rel, _patched(result) or _replaced(root, rel, given), True, False)]
    return []


def _replaced(root: str, rel: str, given: dict[str, object]) -> list[tuple[int, int]] | None:
    """The lines an edit's ``new_string`` holds now, when it is once in the file (None: the
    whole file)."""
    new = given.get("new_string")
    if not isinstance(new, str) or not new.strip() or "old_string" not in given:
        return None
    data = confined.read_planted(root, rel, MAX_EDITED, one_name=False) or b""
    text = new.encode("utf-8", "surrogateescape")
    at = data.find(text)
    if at == -1 or data.find(text, at + 1) != -1:
        return None
    first = data.count(b"\n", 0, at) + 1
    return [(first, first + text.rstrip(b"\n").count(b"\n"))]


def _patched(result: dict[str, object]) -> list[tuple[int, int]] | None:
    """The old file's lines an edit replaced, from Claude Code's ``structuredPatch`` (None:
    not given, take the whole file)."""
    hunks = result.get("structuredPatch")
    if not isinstance(hunks, list) or not hunks:
        return None
    out = []
    for hunk in hunks:
        if not isinstance(hunk, dict):
            continue
        start, count = hunk.get("oldStart"), hunk.get("oldLines")
        if isinstance(start, int) and isinstance(count, int):
            # Only the lines the hunk changed, not its three lines of context each side.
            body = [x for x in hunk.get("lines") or [] if isinstance(x, str)]
            lead = next((i for i, x in enumerate(body) if x[:1] in "+-"), 0)
            tail = next((i for i, x in enumerate(reversed(body)) if x[:1] in "+-"), 0)
            first = start + lead
            last = max(first, start + count - 1 - tail)
            out.append((first, last))
    return out or None


def _grep_hits(root: str, result: dict[str, object]) -> list[Touched]:
    """``path:N:text`` lines of Grep's content mode (files-only results name no lines)."""
    content = result.get("content")
    if not isinstance(content, str):
        return []
    hits: dict[str, list[tuple[int, int]]] = {}
    found = 0
    for line in content.splitlines():
        path, sep, rest = line.partition(":")
        number, sep2, _ = rest.partition(":")
        if not (sep and sep2 and number.isdigit()):
            continue  # a context line (path-N-text), a file name, a count
        found += 1
        if found > GREP_FOCUS:
            return []  # a survey of many places: none of them is where the model looks
        rel = relative(root, path)
        if rel is not None:
            hits.setdefault(rel, []).append((int(number), int(number)))
    return [(rel, ranges, False, False) for rel, ranges in hits.items()]
