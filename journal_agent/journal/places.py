"""Places in one file where a reference's lines could be now, and which of them is certain.

A place holds the recorded lines (their hash); it is *the* place only when what surrounds it
says so too. :class:`FileView` answers that for one file:

- ``pick``: among the places holding the lines, the one in the same definitions as recorded
  (:mod:`journal_agent.journal.scope`: ``Client.send``, never its twin ``AsyncClient.send``);
  among several there, the one with the recorded signature, then the most recorded context
  around it. A place in other definitions is taken only when the recorded ones are gone from
  the file (a rename), the lines had no twin when recorded, and their context came along.
- ``make_anchor``: what a reference records, the definitions around it and its repeats included;
- ``likely``: for lines that changed, where what was cited probably is now — the stretch of
  the recorded definition most like the recorded lines, or, without a definition, the lines
  between the recorded context — or None when nothing there holds what was cited.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from journal_agent.journal.refs import (
    CONTEXT_LINES,
    MAX_KEPT_LINES,
    Anchor,
    CodeRef,
    FileCache,
    decode_line,
    window_hash,
)
from journal_agent.journal.scope import Outline, header_key, kind_of, outline

SUBSTANTIVE = 4  # characters (stripped) for a line to count as telling, unlike "}" or ")"
_LIKE = 0.5  # how alike (difflib's ratio) changed lines must be to what was cited


def span(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}-{end}"


def recorded_names(anchor: Anchor, path: str) -> tuple[bytes, ...] | None:
    """The names of the definitions an anchor was recorded in (None: not recorded)."""
    if anchor.scope is None:
        return None
    kind = kind_of(path)
    out = []
    for line in anchor.scope:
        raw = line.encode("utf-8")
        out.append(header_key(raw, kind) or raw.strip())
    return tuple(out)


def first_line(anchor: Anchor) -> bytes | None:
    """The first recorded line as bytes, to skip places cheaply (None: it was altered when
    recorded — redacted or not UTF-8 — so every place is hashed)."""
    from journal_agent.secret_text import REDACTED

    if not anchor.text or "\ufffd" in anchor.text[0] or REDACTED in anchor.text[0]:
        return None
    return anchor.text[0].encode("utf-8")


@dataclass(frozen=True)
class FileView:
    """One file's lines, with its definitions and an index of its lines read from ``files``
    when first needed (most references are fresh, and need neither)."""

    path: str
    lines: Sequence[bytes]
    files: FileCache

    @cached_property
    def outline(self) -> Outline:
        return self.files.outline(self.path) or outline(self.lines, self.path)

    @cached_property
    def at(self) -> Mapping[bytes, list[int]]:
        """0-based indices of each line."""
        return self.files.positions(self.path)

    # -- the definitions around a place ------------------------------------------------------

    def _index(self, at: int, count: int) -> int:
        """0-based index of the first non-blank line of the ``count`` lines at ``at``."""
        for i in range(at - 1, min(len(self.lines), at - 1 + count)):
            if self.lines[i].strip():
                return i
        return at - 1

    def names(self, at: int, count: int) -> tuple[bytes, ...]:
        return tuple(self.outline.keys[i] for i in self.outline.chain(self._index(at, count)))

    def headers(self, at: int, count: int) -> list[bytes]:
        return [self.lines[i].strip() for i in self.outline.chain(self._index(at, count))]

    def signature(self, at: int, count: int) -> tuple[str, ...]:
        return tuple(decode_line(x) for x in self.headers(at, count))

    def repeats(self, at: int, digest: str, count: int) -> tuple[int, int]:
        """Other places holding these lines: (in the same definitions, in others)."""
        first = self.lines[at - 1]
        here = self.names(at, count)
        copies = twins = 0
        for i in range(len(self.lines) - count + 1):
            if i == at - 1 or self.lines[i] != first:
                continue
            if window_hash(list(self.lines[i : i + count])) == digest:
                if self.names(i + 1, count) == here:
                    copies += 1
                else:
                    twins += 1
        return copies, twins

    # -- places holding the lines ------------------------------------------------------------

    def windows(self, anchor: Anchor, count: int) -> list[int]:
        """1-based starts of every ``count`` lines that hash to the anchor."""
        first = first_line(anchor)
        lines = self.lines
        last = len(lines) - count
        if first is None:
            starts: list[int] | range = range(last + 1)
        else:  # (FileCache's lines carry no "\r")
            starts = [i for i in self.at.get(first, []) if i <= last]
        return [i + 1 for i in starts if window_hash(list(lines[i : i + count])) == anchor.hash]

    def context_sides(self, at: int, count: int, anchor: Anchor) -> tuple[int, int]:
        """How many telling lines of the recorded context surround a place, above and below,
        counted outward from it and only up to the first line that differs: a lone match
        further off (another ``def command(`` three lines up) is a coincidence, not context."""
        lines = self.lines
        above = below = 0
        for k, want in enumerate(reversed(anchor.before), start=1):
            i = at - 1 - k
            if i < 0 or decode_line(lines[i]) != want:
                break
            above += len(want.strip()) >= SUBSTANTIVE
        for k, want in enumerate(anchor.after):
            i = at - 1 + count + k
            if i >= len(lines) or decode_line(lines[i]) != want:
                break
            below += len(want.strip()) >= SUBSTANTIVE
        return above, below

    def context(self, at: int, count: int, anchor: Anchor) -> int:
        return sum(self.context_sides(at, count, anchor))

    def telling(self, at: int, count: int) -> int:
        window = self.lines[at - 1 : at - 1 + count]
        return len({x.strip() for x in window if len(x.strip()) >= SUBSTANTIVE})

    def pick(self, anchor: Anchor, count: int) -> tuple[int | None, list[str]]:
        """The place of the lines in this file, when certain; else None and the places they
        could be (several in the recorded definitions, or only in others)."""
        places = self.windows(anchor, count)
        if not places:
            return None, []
        ambiguous = [span(at, at + count - 1) for at in places] if len(places) > 1 else []
        want = recorded_names(anchor, self.path)
        if want is None:  # recorded before scopes: the lines and their context alone
            return self._by_context(places, anchor, count), ambiguous
        same = [at for at in places if self.names(at, count) == want]
        if same:
            at = self._in_scope(same, anchor, count, bool(want))
            return at, [] if at is not None else ambiguous
        at = places[0]
        # The definition is gone from the file and these lines had no twin: renamed, when their
        # context came along or the signature is the same but for the names.
        if (
            len(places) == 1
            and want
            and not anchor.twins
            and not self.outline.defines(want)
            and (self.context(at, count, anchor) >= 1 or self._same_shape(at, count, anchor))
        ):
            return at, []
        return None, ambiguous

    def _same_shape(self, at: int, count: int, anchor: Anchor) -> bool:
        """The headers around a place are the recorded ones with other names (a rename)."""
        here = self.headers(at, count)
        if anchor.scope is None or len(here) != len(anchor.scope) or not here:
            return False
        kind = kind_of(self.path)
        recorded = [x.encode("utf-8") for x in anchor.scope]
        return [_shape(x, kind) for x in here] == [_shape(x, kind) for x in recorded]

    def _in_scope(self, same: list[int], anchor: Anchor, count: int, named: bool) -> int | None:
        """One of the places in the recorded definitions. Inside a named definition a single
        place is certain unless the lines were repeated there when recorded; at the top of a
        file (no definition) it needs its context, or three telling lines."""
        if len(same) == 1 and not anchor.copies:
            at = same[0]
            if named or self.context(at, count, anchor) >= 1:
                return at
            if not anchor.twins and self.telling(at, count) >= 3:
                return at
            return None
        if anchor.copies and len(same) != anchor.copies + 1:
            return None  # one of repeated lines changed: which one is not known
        signed = [at for at in same if self.signature(at, count) == anchor.scope]
        pool = signed or same
        if len(pool) == 1:
            return pool[0]
        scores = [self.context(at, count, anchor) for at in pool]
        best = max(scores)
        return pool[scores.index(best)] if best >= 1 and scores.count(best) == 1 else None

    def _by_context(self, places: list[int], anchor: Anchor, count: int) -> int | None:
        scores = [self.context(at, count, anchor) for at in places]
        best = max(scores)
        if len(places) == 1:
            at = places[0]
            # A lone place needs context when context was recorded (a twin has the same lines);
            # an anchor of the first format (the hash alone) has only the lines to go by.
            hash_only = not anchor.before and not anchor.after and not anchor.text
            strong = hash_only and self.telling(at, count) >= 3
            return at if best >= 1 or strong else None
        if best >= 1 and scores.count(best) == 1:
            return places[scores.index(best)]
        return None

    def better_place(self, start: int, anchor: Anchor, count: int) -> int | None:
        """For lines that still hash as recorded at their place: another place, when these
        lines are too plain to tell apart (``...``, ``return None``), none of the recorded
        context is around them any more, and it is all around one other place (an overload
        that moved)."""
        if self.telling(start, count) >= 3 or self.context(start, count, anchor):
            return None
        if not any(len(x.strip()) >= SUBSTANTIVE for x in (*anchor.before, *anchor.after)):
            return None
        at, _ = self.pick(anchor, count)
        return at if at is not None and at != start else None

    # -- where changed lines probably are --------------------------------------------------

    def definition(self, anchor: Anchor) -> tuple[int, int] | None:
        """1-based first and last line of the recorded definition in this file, when it is
        here once (or once with the recorded signature)."""
        want = recorded_names(anchor, self.path)
        if not want:
            return None
        heads = self.outline.defines(want)
        if len(heads) > 1 and anchor.scope:
            heads = [h for h in heads if decode_line(self.lines[h].strip()) == anchor.scope[-1]]
        if len(heads) != 1:
            return None
        lo, hi = self.outline.extent(heads[0])
        return lo + 1, hi + 1

    def likely(self, anchor: Anchor, start: int, count: int) -> tuple[int, int] | None:
        """Where the changed lines cited at ``start`` probably are now (1-based, inclusive),
        or None when no stretch of the file holds what was cited."""
        if not anchor.text:
            return None
        want = recorded_names(anchor, self.path)
        inside = self.definition(anchor)
        if inside is not None:
            return self._most_alike(anchor, inside, start, count)
        if want and not self.outline.defines(want):
            return None  # the definition is gone from this file
        region = _region(self.lines, anchor, start, count)
        if region is None:
            return None
        a, b = region
        return region if _alike(anchor.text, self.lines[a - 1 : b]) >= _LIKE else None

    def _most_alike(
        self, anchor: Anchor, inside: tuple[int, int], start: int, count: int
    ) -> tuple[int, int] | None:
        lo, hi = inside
        size = min(count, hi - lo + 1)
        wanted = {x.strip() for x in anchor.text if x.strip()}
        ranked = []
        for at in range(lo, hi - size + 2):
            window = self.lines[at - 1 : at - 1 + size]
            shared = sum(1 for x in window if decode_line(x).strip() in wanted)
            ranked.append((shared, -abs(at - start), at))
        ranked.sort(reverse=True)
        # Stretches sharing lines with what was cited are compared first; when none does (a
        # one-line reference edited), every stretch of the definition is (at most 400).
        tried = ranked[:3] if ranked and ranked[0][0] > 0 else ranked[:400]
        best: tuple[float, int, int] | None = None  # (ratio, -distance, at)
        for _, distance, at in tried:
            ratio = _alike(anchor.text, self.lines[at - 1 : at - 1 + size])
            if best is None or (ratio, distance) > best[:2]:
                best = (ratio, distance, at)
        if best is None or best[0] < _LIKE:
            return None
        return best[2], best[2] + size - 1


def make_anchor(ref: CodeRef, files: FileCache, commit: str | None = None) -> Anchor | None:
    """The anchor of a reference that resolves, else None."""
    from journal_agent.secret_text import redact_secrets

    lines = files.lines(ref.path)
    if lines is None or ref.start < 1 or ref.end < ref.start:
        return None
    if ref.end > len(lines):
        return None
    cited = lines[ref.start - 1 : ref.end]

    def kept(part: list[bytes]) -> tuple[str, ...]:
        return tuple(redact_secrets(decode_line(x)) for x in part)

    first = max(0, ref.start - 1 - CONTEXT_LINES)
    view = FileView(ref.path, lines, files)
    digest = window_hash(cited)
    copies, twins = view.repeats(ref.start, digest, len(cited))
    return Anchor(
        hash=digest,
        count=len(cited),
        text=kept(cited) if len(cited) <= MAX_KEPT_LINES else (),
        before=kept(lines[first : ref.start - 1]),
        after=kept(lines[ref.end : ref.end + CONTEXT_LINES]),
        commit=commit,
        scope=kept(view.headers(ref.start, len(cited))),
        copies=copies,
        twins=twins,
    )


def _shape(header: bytes, kind: str) -> bytes:
    """A header line without the name it defines (``def (path):``)."""
    key = header_key(header, kind)
    name = key.rsplit(b" ", 1)[-1] if key else b""
    return header.strip().replace(name, b"", 1) if name else header.strip()


_TOKEN = re.compile(r"\w+|[^\w\s]|\n")


def _alike(recorded: Sequence[str], now: Sequence[bytes]) -> float:
    """How alike two stretches of code are: difflib's ratio over their tokens (names,
    numbers, punctuation, line ends), which weighs ``optimizer.step()`` nearer to
    ``scaler.step(optimizer)`` than to ``optimizer.zero_grad(...)``, as a reader does."""
    a = _TOKEN.findall("\n".join(x.strip() for x in recorded))
    b = _TOKEN.findall("\n".join(decode_line(x).strip() for x in now))
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _region(
    lines: Sequence[bytes], anchor: Anchor, start: int, count: int
) -> tuple[int, int] | None:
    """Between the recorded context when it is found once, else at the old line numbers."""
    text = [decode_line(x) for x in lines]
    first = _after_block(text, anchor.before)
    last = _before_block(text, anchor.after)
    if first is not None and last is not None and first <= last and last - first < 3 * count + 10:
        return first, last
    if first is not None:
        return first, min(len(text), first + count - 1)
    if last is not None and last >= 1:
        return max(1, last - count + 1), last
    if start > len(text):
        return None
    return start, min(len(text), start + count - 1)


def _after_block(text: list[str], block: tuple[str, ...]) -> int | None:
    """The 1-based line just after the one place ``block`` occurs (if it tells anything)."""
    if not any(len(x.strip()) >= SUBSTANTIVE for x in block):
        return None
    n = len(block)
    places = [i for i in range(len(text) - n + 1) if tuple(text[i : i + n]) == block]
    return places[0] + n + 1 if len(places) == 1 else None


def _before_block(text: list[str], block: tuple[str, ...]) -> int | None:
    """The 1-based line just before the one place ``block`` occurs."""
    if not any(len(x.strip()) >= SUBSTANTIVE for x in block):
        return None
    n = len(block)
    places = [i for i in range(len(text) - n + 1) if tuple(text[i : i + n]) == block]
    return places[0] if len(places) == 1 else None
