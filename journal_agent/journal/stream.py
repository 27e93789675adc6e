"""The journal read an entry at a time: memory bounded by one entry, not by the journal.

``parse_journal(text)`` needs the whole journal as one ``str`` — 100 MB of markdown with emoji
is 400 MB as a ``str``, and every entry's ``raw`` another copy — so reading a 100 MB journal
took 1.0–1.9 GB (``journal list``, ``journal check``, ``review --list``, the review page).
:class:`JournalFile` gives the same entries without ever holding the text:

1. **The outline** (:attr:`JournalFile.outline`): one pass over the file's bytes, a chunk at a
   time, finds every entry heading outside code blocks (the same rules as ``parse_journal``,
   on bytes) and keeps, per entry, its byte range, first line, title, date and id — assigned
   exactly as ``parse_journal`` assigns them (the ids we wrote first, then the derived ones,
   made unique in journal order). It also checks that the file is UTF-8.
2. **The entries** (:meth:`JournalFile.entries`): each entry's bytes read and parsed alone,
   one at a time, from the same open file — a journal replaced by an append meanwhile (a new
   file renamed over the old one) does not mix two versions.

For every file, ``[e.raw for e in JournalFile(p, file=f).entries()]`` is ``[e.raw for e in
parse_journal(text).entries]`` with the same ids, titles, dates and lines
(tests/journal/test_stream.py holds them equal on generated and hand-written journals).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from journal_agent.journal._text import slugify
from journal_agent.journal.model import Entry, entry_heading, unique_id

CHUNK = 1 << 20  # bytes read at a time for the outline
_BOM = b"\xef\xbb\xbf"
# parse_journal's _STRUCTURE, on bytes: fence lines and level-1/2 headings.
_STRUCTURE = re.compile(
    rb"(?m)^ {0,3}(?:(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)|#{1,2}[ \t][^\n]*)$"
)
# parse_journal's _EXPLICIT_ID: the id comment within three lines under the heading.
_EXPLICIT_ID = re.compile(
    r"\A[^\n]*\n(?:[ \t]*\r?\n){0,2}"
    r"[ \t]*<!--[ \t]*entry:[ \t]*(?P<id>[^\s>]+)[ \t]*-->[ \t]*\r?(?:\n|\Z)"
)
_HEAD_LINES = 4  # the heading, two blank lines at most, the id comment


@dataclass(frozen=True, slots=True)
class Span:
    """Where one entry is in the file, and what names it."""

    start: int  # byte offset of its heading
    end: int  # byte offset just past it (the next heading, or the end of the file)
    line: int  # 1-based line of its heading
    title: str
    date: str
    id: str
    explicit: bool  # the id is the one written in its ``<!-- entry: … -->`` comment


@dataclass(frozen=True)
class Outline:
    spans: list[Span]
    preamble_end: int  # the text before the first entry ends here
    size: int


class JournalFile:
    """An open journal file, read an entry at a time (see the module).

    ``errors``: ``"strict"`` refuses a file that is not UTF-8 (:class:`UnicodeDecodeError`
    from the outline, before any entry), ``"replace"`` reads it anyway (``journal check``
    reports the bad bytes itself).
    """

    def __init__(
        self, path: Path | str, *, file: BinaryIO, errors: str = "strict", owned: bool = False
    ) -> None:
        self.path = Path(path)
        self.errors = errors
        # ``file``: the journal, opened by the caller through the room (never by name here:
        # journal_agent.confined); closed by its owner, or here when ``owned``.
        self._owned = owned
        self._f = file
        self._outline: Outline | None = None

    def __enter__(self) -> JournalFile:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self._f.close()

    @property
    def outline(self) -> Outline:
        if self._outline is None:
            self._outline = self._scan()
        return self._outline

    def __len__(self) -> int:
        return len(self.outline.spans)

    def __iter__(self) -> Iterator[Entry]:
        """The entries, read again on every walk (for a reader that walks them twice)."""
        return self.entries()

    def preamble(self) -> str:
        return self.preamble_bytes().decode("utf-8", self.errors)

    def preamble_bytes(self) -> bytes:
        return self._read(0, self.outline.preamble_end)

    def bytes_of(self, span: Span) -> bytes:
        """The entry's bytes as they are in the file."""
        return self._read(span.start, span.end)

    def entries(self) -> Iterator[Entry]:
        """Every entry, in journal order, parsed from its own bytes."""
        for span in self.outline.spans:
            yield self.entry(span)

    def entry(self, span: Span) -> Entry:
        raw = self.bytes_of(span).decode("utf-8", self.errors)
        return Entry(
            raw=raw,
            start_line=span.line,
            title=span.title,
            date=span.date,
            id=span.id,
            explicit_id=span.explicit,
        )

    def find(self, key: str) -> Entry | None:
        """``Journal.get``: an entry by id, by 1-based position, or by a unique title part."""
        spans = self.outline.spans
        for span in spans:
            if span.id == key:
                return self.entry(span)
        if key.isdigit() and 1 <= int(key) <= len(spans):
            return self.entry(spans[int(key) - 1])
        hits = [s for s in spans if key.lower() in s.title.lower()]
        return self.entry(hits[0]) if len(hits) == 1 else None

    # -- the outline ---------------------------------------------------------------------

    def _read(self, start: int, end: int) -> bytes:
        return os.pread(self._f.fileno(), end - start, start)

    def _scan(self) -> Outline:
        found: list[tuple[int, int, str, str]] = []  # (offset, line, title, date)
        fence = _Fence()
        # A byte-order mark does not hide line 1: the entries are found after it.
        offset = len(_BOM) if self._read(0, len(_BOM)) == _BOM else 0
        self._f.seek(offset)
        line, pending = 1, b""
        while True:
            block = self._f.read(CHUNK)
            data = pending + block
            cut = len(data) if not block else data.rfind(b"\n") + 1
            if cut == 0 and block:  # one line longer than a chunk: read on
                pending = data
                continue
            done, pending = data[:cut], data[cut:]
            done.decode("utf-8", self.errors)  # a file that is not UTF-8 is refused here
            counted = 0
            for m in _STRUCTURE.finditer(done):
                if fence.fold(m):
                    continue
                heading = entry_heading(m.group(0).decode("utf-8", self.errors))
                if heading is None:
                    continue
                line += done.count(b"\n", counted, m.start())
                counted = m.start()
                found.append((offset + m.start(), line, *heading))
            line += done.count(b"\n", counted)
            offset += cut
            if not block:
                break
        size = offset
        spans = self._spans(found, size)
        return Outline(spans=spans, preamble_end=spans[0].start if spans else size, size=size)

    def _spans(self, found: list[tuple[int, int, str, str]], size: int) -> list[Span]:
        ends = [start for start, _, _, _ in found[1:]] + [size]
        explicit = [self._explicit_id(start, ends[n]) for n, (start, *_) in enumerate(found)]
        ids: list[str] = [""] * len(found)
        used: set[str] = set()
        # As parse_journal: the ids we wrote first, then those derived from title and date.
        for n, given in enumerate(explicit):
            if given is not None:
                ids[n] = unique_id(given, used)
                used.add(ids[n])
        for n, (_, _, title, date) in enumerate(found):
            if explicit[n] is None:
                ids[n] = unique_id(f"{slugify(title)}-{date}", used)
                used.add(ids[n])
        return [
            Span(start, ends[n], line, title, date, ids[n], explicit[n] is not None)
            for n, (start, line, title, date) in enumerate(found)
        ]

    def _explicit_id(self, start: int, end: int) -> str | None:
        """The id in the entry's id comment, reading only its first lines."""
        head, at = b"", start
        while head.count(b"\n") < _HEAD_LINES and at < end:
            more = self._read(at, min(end, at + 512))
            if not more:
                break
            head, at = head + more, at + len(more)
        if head.count(b"\n") >= _HEAD_LINES:  # cut after the 4th line (\Z only at the end)
            head = head[: _nth_newline(head, _HEAD_LINES) + 1]
        match = _EXPLICIT_ID.match(head.decode("utf-8", self.errors))
        return match.group("id") if match else None


class FileBytes:
    """A file's bytes as far as a reader of ``bytes`` needs them — ``len``, slices and
    ``count`` — read from the file when asked: the search index finds an edited stretch by
    hashing entries where they were, without holding the journal."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.stat = os.fstat(file.fileno())
        self._size = self.stat.st_size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, step = where.indices(self._size)
        assert step == 1, "contiguous slices only"
        return os.pread(self.file.fileno(), max(0, stop - start), start)

    def count(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """``bytes.count`` of a one-byte ``sub`` (a newline), a chunk at a time."""
        assert len(sub) == 1, "one byte: a match never straddles two chunks"
        end = self._size if end is None else min(end, self._size)
        total = 0
        for at in range(start, end, CHUNK):
            total += self[at : min(end, at + CHUNK)].count(sub)
        return total


def _nth_newline(data: bytes, n: int) -> int:
    at = -1
    for _ in range(n):
        at = data.index(b"\n", at + 1)
    return at


class _Fence:
    """Inside a fenced code block or not, as parse_journal (and fence_mask) decide it."""

    def __init__(self) -> None:
        self.char, self.length = b"", 0

    def fold(self, m: re.Match[bytes]) -> bool:
        """Take a structure line; True when it is a fence line or inside a code block."""
        fence = m.group("fence")
        if fence is not None:
            if not self.char:
                self.char, self.length = fence[:1], len(fence)
            elif (
                fence[:1] == self.char
                and len(fence) >= self.length
                and not m.group("info").decode("utf-8", "replace").strip()
            ):
                self.char = b""
            return True
        return bool(self.char)


__all__ = ["FileBytes", "JournalFile", "Outline", "Span"]
