"""An Edit, MultiEdit or Write of a cited file (capture/touch.py): where each of the file's
references was just before it (what the edit is compared with: capture/cited_place.py) and
where the edit left it (kept for the session's later Reads and Greps:
capture/session_places.py).

An edit looks at every reference to its file. Parsing each one's line of ``refs.jsonl`` and
hashing its lines twice (before the edit and after it) cost an Edit of a file 500 references
cite 18 ms of CPU (benchmarks/bench_hooks.py, ``PostToolUse cited edit``). Here each comes
from its row in the index of cited files (capture/refs_by_file.py: the lines, the recorded hash
and the entry's id), its lines before the edit are hashed once, and where they are after it is
found by comparing those very lines (equal lines, equal hash) in the order
``cited_place.where`` tries: where recorded, where the last reference moved to, else where its
first line is. Only a reference whose lines are not where recorded, or whose row cannot say
what it needs, is read from its line, as before. Every reference the edit touched is read from
its line, which must say what its row does, before it can be named: else the index is dropped
and the caller searches ``refs.jsonl`` (an edited index can make the hook silent, never make
it name what refs.jsonl does not say).

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

from journal_agent.capture import refs_by_file, session_places
from journal_agent.capture.cited_place import before_edit, digest, span, where

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    Anchor = dict[str, object]
    Near = tuple[str, str, Anchor, tuple[int, int]]  # entry, key, anchor, its lines before

REFS = ".journal/refs.jsonl"


class Before:
    """The touched file's lines just before an edit, made once when a reference is looked at:
    the file now with Claude Code's hunks put back (our runtime's Edit gives the lines its new
    text holds now: the file now); None when the hunks do not fit it."""

    def __init__(self, payload: dict[str, object], now: Callable[[], list[bytes]]) -> None:
        result = payload.get("tool_response")
        self.hunks = result.get("structuredPatch") if isinstance(result, dict) else None
        self.now, self.done = now, False
        self._lines: list[bytes] | None = None

    def get(self) -> list[bytes] | None:
        if not self.done:
            now, self.done = self.now(), True
            self._lines = before_edit(now, self.hunks) if self.hunks else now
        return self._lines


def keep_places(
    root: str, session: str, rel: str, now: list[bytes], refs: list[tuple[str, str, Anchor]]
) -> None:
    """After an edit of a cited file: where each of its references ``refs`` is now, for the
    session's later Reads and Greps (those still at their recorded lines need no word); when
    the index of cited files could not be had (:func:`near`, the same from its rows)."""
    places: session_places.Places = {}
    # How far the last one moved, tried first: an insertion moves the lines below it alike (a
    # search of the file per reference otherwise).
    shift = 0
    for _, key, anchor in refs:
        ref, recorded = span(key), anchor.get("hash")
        if ref is None or not isinstance(recorded, str) or not recorded.isalnum():
            continue
        at = where(now, ref, anchor, ref[0] + shift if shift else 0)
        if at is not None and at != ref[0]:
            places[(ref[0], ref[1], recorded)] = at
            shift = at - ref[0]
    session_places.keep(root, session, rel, places)


def near(
    root: str,
    session: str,
    rel: str,
    now: Callable[[], list[bytes]],
    before: Before,
    keep: Callable[[tuple[int, int]], bool],
) -> list[Near] | None:
    """The references to ``rel`` whose lines before the edit ``keep`` takes, newest first,
    each read from its line; where every reference is now kept for the session. None when the
    index of cited files cannot be had, or one of its rows is not what its line says (the
    index dropped): the caller searches ``refs.jsonl``."""
    st: list = []
    data = refs_by_file.mapped(root, REFS, st)
    if not data:
        return []
    found = refs_by_file.rows(root, data, st[0].st_ino, rel)
    if found is None:
        return None
    pre, after = before.get() or None, now()
    out: list[Near] = []
    places: session_places.Places = {}
    shift, looked = 0, False  # (shift: as keep_places)
    seen = _Seen(pre, (root, session, rel))
    try:
        for entry, key, ref, recorded, anchor, offset in _refs(data, rel, found):
            looked = True
            # The cited lines before the edit, and where, when found without their line.
            content, here = seen.lines(ref, recorded) if anchor is None else (None, ref)
            if content is None and anchor is None:
                anchor = _anchor(data, (offset, entry, key, recorded))
            if content is None and pre is not None:  # (placed: elsewhere, or where recorded)
                was = where(pre, ref, anchor)  # type: ignore[arg-type]
                if was is not None:
                    here = (was, was + ref[1] - ref[0])
                    content = pre[was - 1 : here[1]]
            if keep(here):
                out.append(
                    (entry, key, anchor or _anchor(data, (offset, entry, key, recorded)), here)
                )
            if not isinstance(recorded, str) or not recorded.isalnum():
                continue
            guess = ref[0] + shift if shift else 0
            if content is None:
                at = where(after, ref, anchor, guess)  # type: ignore[arg-type]
            else:
                line = anchor or (data, (offset, entry, key, recorded))
                at = _after(after, ref[0], content, guess, line)
            if at is not None and at != ref[0]:
                places[(ref[0], ref[1], recorded)] = at
                shift = at - ref[0]
    except refs_by_file.Stale:
        refs_by_file.drop(root)  # not ours as written: the next call builds it again
        return None
    if looked:
        session_places.keep(root, session, rel, places)
    return out


class _Seen:
    """Where a row's cited lines were before the edit, found with no line of refs.jsonl
    read: where recorded (one hash; memoized, rows share lines), else where the session's
    last edit of the file left them (capture/session_places.py, checked by their hash)."""

    def __init__(self, pre: list[bytes] | None, session: tuple[str, str, str]) -> None:
        self.pre, self.session = pre, session
        self.hashed: dict[tuple[int, int], tuple[list[bytes], str]] = {}
        self.last: session_places.Places | None = None

    def lines(
        self, ref: tuple[int, int], recorded: object
    ) -> tuple[list[bytes] | None, tuple[int, int]]:
        """``(the cited lines, where they start and end)``; ``(None, ref)`` when not found."""
        pre = self.pre
        if pre is None:
            return None, ref
        if ref not in self.hashed:
            window = pre[ref[0] - 1 : ref[1]]
            whole = len(window) == ref[1] - ref[0] + 1
            self.hashed[ref] = (window, digest(window) if whole else "")
        window, hashd = self.hashed[ref]
        if hashd == recorded:
            return window, ref  # (what cited_place.placed says)
        if self.last is None:
            self.last = session_places.current(*self.session, stamped=False) or {}
        content = _moved(pre, ref, self.last.get((ref[0], ref[1], str(recorded))), recorded)
        if content is None:
            return None, ref
        was = _first_at(pre, content)  # (where placed's search stops)
        return content, (was, was + ref[1] - ref[0])


def _after(
    lines: list[bytes], at: int, content: list[bytes], guess: int, line: Anchor | tuple
) -> int | None:
    """Where ``content`` (the cited lines) is in ``lines``, as ``cited_place.where`` finds
    them by their hash: at ``at`` (where recorded), at ``guess``, else the first place that
    starts with the anchor's first line (``line``: the anchor, or where to read it only then:
    ``(data, row)`` for :func:`_anchor`)."""
    count = len(content)
    if lines[at - 1 : at - 1 + count] == content:
        return at
    if guess > 0 and lines[guess - 1 : guess - 1 + count] == content:
        return guess
    if isinstance(line, dict):
        first = _first(line)
    else:  # (a row's line read only when the first cited line is not UTF-8)
        first = None if _utf8(content[0]) else _first(_anchor(*line))
    if first is not None and first != content[0]:
        return None  # (where's search looks only at places that start with it)
    start = -1
    while True:
        try:
            start = lines.index(content[0], start + 1)
        except ValueError:
            return None
        if lines[start : start + count] == content:
            return start + 1


def _moved(
    pre: list[bytes], ref: tuple[int, int], at: int | None, recorded: object
) -> list[bytes] | None:
    """The cited lines at ``at`` in the file before the edit (where the session's last edit
    left them), when they are there and their first line is UTF-8; else None (the line of
    refs.jsonl is read and the file searched)."""
    if at is None or at < 1:
        return None
    window = pre[at - 1 : at + ref[1] - ref[0]]
    whole = len(window) == ref[1] - ref[0] + 1
    return window if whole and digest(window) == recorded and _utf8(window[0]) else None


def _first_at(lines: list[bytes], content: list[bytes]) -> int:
    """The first place in ``lines`` that holds ``content`` (which is somewhere in them): where
    ``where``'s search by the anchor's first line and hash would stop."""
    start = 0
    while True:
        start = lines.index(content[0], start) + 1
        if lines[start - 1 : start - 1 + len(content)] == content:
            return start


def _utf8(line: bytes) -> bool:
    """Whether ``line`` is UTF-8: then the anchor's first line, kept decoded (journal/refs.py,
    with replacement characters), is this very line, or was not kept (a search looks at every
    place then): ``where``'s search takes the places that start with it either way."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _first(anchor: Anchor) -> bytes | None:
    """The first cited line as the anchor kept it (None: not kept)."""
    text = anchor.get("text")
    try:
        return text[0].encode() if isinstance(text, list) and text else None
    except (AttributeError, UnicodeEncodeError):
        return None


def _anchor(data: refs_by_file.Data, row: tuple[int, str, str, object]) -> Anchor:
    """The anchor of ``key`` in the line at ``offset`` (``row``: offset, entry, key, recorded
    hash), which must be ``entry``'s and record that hash, as the index's row says: else
    :class:`refs_by_file.Stale`."""
    offset, entry, key, recorded = row
    item = refs_by_file.line_at(data, offset)
    anchors = (item.get("anchors") or item.get("refs")) if item is not None else None
    if item is None or item["entry"] != entry or key not in anchors:  # type: ignore[operator]
        raise refs_by_file.Stale(offset)
    anchor = anchors[key]  # type: ignore[index]
    anchor = anchor if isinstance(anchor, dict) else {"hash": anchor}
    if anchor.get("hash") != recorded:
        raise refs_by_file.Stale(offset)
    return anchor


def _refs(
    data: refs_by_file.Data, rel: str, found: tuple
) -> Iterator[tuple[str, str, tuple[int, int], object, Anchor | None, int]]:
    """``(entry, key, lines, recorded hash, anchor, offset of its line)`` of each reference
    to ``rel``, newest first, as ``refs_by_file.cited`` yields them; the anchor None for a row
    that says all an edit needs (its line is read only when needed: :func:`_anchor`)."""
    indexed, tail = found
    seen: dict[str, int] = {}  # entry -> the offset of the line of it that counts
    for offset in tail:  # newer than any row: an entry's line here wins
        item = refs_by_file.line_at(data, offset)
        if item is not None and item["entry"] not in seen:
            seen[item["entry"]] = offset  # type: ignore[index]  # (a str: line_at)
            for entry, key, anchor in refs_by_file.keys(item, rel, set()):
                lines = span(key)
                if lines is not None:
                    yield entry, key, lines, anchor.get("hash"), anchor, offset
    for offset, first, last, recorded, named in indexed:
        if not 1 <= first <= last:
            continue  # (span takes no such lines)
        entry = named.decode("utf-8", "replace")
        key = f"{rel}:{first}" + (f"-{last}" if last != first else "")
        anchor = None
        if not entry or recorded == b"-":  # the row cannot say it: its line does
            item = refs_by_file.line_at(data, offset)
            anchors = (item.get("anchors") or item.get("refs")) if item is not None else None
            if item is None or key not in anchors:  # type: ignore[operator]
                raise refs_by_file.Stale(offset)
            entry, anchor = str(item["entry"]), anchors[key]  # type: ignore[index]
            anchor = anchor if isinstance(anchor, dict) else {"hash": anchor}
        if seen.setdefault(entry, offset) != offset:
            continue  # an older line of the entry
        if anchor is None:
            yield entry, key, (first, last), recorded.decode(), None, offset
        else:
            yield entry, key, (first, last), anchor.get("hash"), anchor, offset
