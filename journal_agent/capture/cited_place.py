"""Where an entry's cited lines are in a file's lines, and the file as it stood before an edit:
PostToolUse (capture/touch.py) compares what a call touched with where the cited lines ARE,
not with the lines recorded when the entry was written.

A session's earlier edits move code: an Edit's ``structuredPatch`` hunks are numbered in the
file as it stood just before that edit, so a hunk near where cited lines used to be is not an
edit of them (the replay of real sessions, benchmarks/bench_touch_replay.py, named such entries:
precision 0.818). The file before the edit is the file now with each hunk's new side put back
to its old side; the cited lines are found in it by the hash of their window, at the recorded
place first, else where their first line is.

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_SHA256: list[Callable[[bytes], Any]] = []  # looked up once: a failed import is a path search


def _sha256() -> Callable[[bytes], Any]:
    if not _SHA256:
        from journal_agent.capture.store import _sha256 as sha

        _SHA256.append(sha())
    return _SHA256[0]


def span(key: str) -> tuple[int, int] | None:
    """``path:N`` / ``path:N-M`` → (N, M)."""
    lines = key.rsplit(":", 1)[-1]
    first, _, last = lines.partition("-")
    try:
        start, end = int(first), int(last or first)
    except ValueError:
        return None
    return (start, end) if 1 <= start <= end else None


def digest(window: list[bytes]) -> str:
    """The hash of consecutive lines, as a reference records it (journal/refs.py's
    ``window_hash``)."""
    return _sha256()(b"\n".join(window)).hexdigest()[:16]


def where(
    lines: list[bytes], ref: tuple[int, int], anchor: dict[str, object], guess: int = 0
) -> int | None:
    """The first line of the cited lines in ``lines`` (the recorded place when they are still
    there, else ``guess`` when they are there: an edit shifts the lines below it alike), None
    when they are nowhere (changed) or the anchor holds no hash."""
    recorded = anchor.get("hash")
    if not isinstance(recorded, str):
        return None
    sha = _sha256()
    count = ref[1] - ref[0] + 1

    def at(start: int) -> bool:
        window = lines[start - 1 : start - 1 + count]
        return len(window) == count and sha(b"\n".join(window)).hexdigest()[:16] == recorded

    if at(ref[0]):
        return ref[0]
    if guess > 0 and at(guess):
        return guess
    text = anchor.get("text")
    first = text[0].encode() if isinstance(text, list) and text else None
    if first is None:  # (no text kept: every place is hashed)
        return next((s for s in range(1, len(lines) - count + 2) if at(s)), None)
    start = 0  # (the places that start with the first line, found by list.index: C speed)
    while True:
        try:
            start = lines.index(first, start) + 1
        except ValueError:
            return None
        if start > len(lines) - count + 1:
            return None
        if at(start):
            return start


def before_edit(after: list[bytes], hunks: object) -> list[bytes] | None:
    """The file's lines before an edit: ``after`` (the file now) with each hunk of Claude
    Code's ``structuredPatch`` put back to its old side. None when the hunks are not given or
    do not fit the file now (another hand changed it since): the caller keeps the recorded
    lines."""
    if not isinstance(hunks, list) or not hunks:
        return None
    out: list[bytes] = []
    done = 0  # lines of ``after`` copied or replaced so far
    for hunk in hunks:
        if not isinstance(hunk, dict):
            return None
        start, count, body = hunk.get("newStart"), hunk.get("newLines"), hunk.get("lines")
        if not (isinstance(start, int) and isinstance(count, int) and isinstance(body, list)):
            return None
        body = [x for x in body if isinstance(x, str) and x[:1] in " +-"]  # not "\ No newline"
        new = [x[1:].encode("utf-8", "surrogateescape").rstrip(b"\r") for x in body if x[0] != "-"]
        old = [x[1:].encode("utf-8", "surrogateescape").rstrip(b"\r") for x in body if x[0] != "+"]
        first = start - 1 if count else start  # an empty new side is numbered after its line
        if first < done or len(new) != count or after[first : first + count] != new:
            return None
        out += after[done:first]
        out += old
        done = first + count
    out += after[done:]
    return out


def placed(
    lines: list[bytes] | None, ref: tuple[int, int], anchor: dict[str, object]
) -> tuple[int, int]:
    """The cited lines where they are in ``lines``; where recorded when they are not found
    there (changed before, or no file: what the call touched is compared with those)."""
    at = where(lines, ref, anchor) if lines else None
    return ref if at is None else (at, at + ref[1] - ref[0])
