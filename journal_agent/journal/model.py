"""The journal as data: a preamble plus entries, each keeping its exact source text.

Parsing never normalises anything: every entry keeps its raw text (line endings, trailing
spaces, hand edits, unknown headings), so ``parse_journal(t).render() == t`` for every ``t``.
Sections, references, citations and tags are views computed from that text.

An entry starts at a ``#`` or ``##`` heading that carries a date (``## ZeRO Stage 2
(2026-11-21)``), outside code blocks, and runs to the next one. Its id comes from an
``<!-- entry: <id> -->`` comment on the line after the heading (we write one on append, so the
id survives title edits) or, for entries written by hand, from the title and date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypedDict

from journal_agent.journal._text import bare, fence_mask, slugify, split_lines
from journal_agent.journal.refs import CodeRef, find_refs
from journal_agent.journal.sections import SectionSpec, identify
from profiling.citations import CITATION

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
_DATE_IN_TITLE = re.compile(r"\s*[(\[]?\s*\d{4}-\d{2}-\d{2}\s*[)\]]?\s*")
_ID_COMMENT = re.compile(r"^\s*<!--\s*entry:\s*(?P<id>[^\s>]+)\s*-->\s*$")
_BOLD_LABEL = re.compile(r"^\s{0,3}\*\*(?P<label>[^*]+?)\*\*\s*(?P<colon>:)?")
_TAG = re.compile(r"(?<![\w#&/(\[=:'\"`])#(?P<tag>[^\W\d][\w-]*)")


@dataclass(frozen=True)
class Citation:
    record_id: str
    line: int  # 1-based in the document
    start: int  # column of "[" in the line
    end: int


@dataclass
class Section:
    spec: SectionSpec | None  # None: text before the first recognised section
    label: str
    start: int  # index of the first line within the entry
    end: int  # exclusive
    text: str


def entry_heading(line: str) -> tuple[str, str] | None:
    """``(title, date)`` when the line is an entry heading, else None."""
    match = _HEADING.match(bare(line))
    if not match or len(match.group(1)) > 2:
        return None
    text = match.group(2)
    date = _DATE.search(text)
    if date is None:
        return None
    title = _DATE_IN_TITLE.sub(" ", text, count=1).strip(" \t-—–:|,")
    return title or text, date.group(1)


@dataclass
class Entry:
    raw: str  # the exact source text, heading to the next entry's heading
    start_line: int  # 1-based line of the heading in the journal
    title: str
    date: str
    id: str = ""
    explicit_id: bool = False

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.raw)

    def render(self) -> str:
        return self.raw

    @property
    def heading(self) -> str:
        return bare(self.lines[0])

    @property
    def derived_id(self) -> str:
        return f"{slugify(self.title)}-{self.date}"

    @cached_property
    def fences(self) -> list[bool]:
        return fence_mask(self.lines)

    @cached_property
    def sections(self) -> list[Section]:
        starts: list[tuple[int, SectionSpec | None, str]] = [(0, None, self.heading)]
        for i in range(1, len(self.lines)):
            if self.fences[i]:
                continue
            first = self.lines[i].lstrip(" ")[:1]
            if first != "#" and first != "*":
                continue
            line = bare(self.lines[i])
            label = None
            strict = False
            heading = _HEADING.match(line)
            if heading:
                label = heading.group(2)
            else:
                strict = True
                bold = _BOLD_LABEL.match(line)
                if bold and (bold.group("colon") or bold.group("label").rstrip().endswith(":")):
                    label = bold.group("label").rstrip().rstrip(":")
                elif bold and bold.end() >= len(line.rstrip()):
                    label = bold.group("label")
            if label is None:
                continue
            spec = identify(label, strict=strict)
            if spec is not None and spec.key != "header":
                starts.append((i, spec, label))
        out: list[Section] = []
        for n, (i, spec, label) in enumerate(starts):
            end = starts[n + 1][0] if n + 1 < len(starts) else len(self.lines)
            out.append(Section(spec, label, i, end, "".join(self.lines[i:end])))
        return out

    def section_keys(self) -> set[str]:
        keys = {"header"}
        keys.update(s.spec.key for s in self.sections if s.spec is not None)
        return keys

    def section_text(self, key: str) -> str:
        return "".join(s.text for s in self.sections if s.spec is not None and s.spec.key == key)

    @cached_property
    def refs(self) -> list[CodeRef]:
        refs: list[CodeRef] = []
        for i, line in enumerate(self.lines):
            if not self.fences[i] and ":" in line:
                refs.extend(find_refs(bare(line), self.start_line + i))
        return refs

    @cached_property
    def citations(self) -> list[Citation]:
        out: list[Citation] = []
        for i, line in enumerate(self.lines):
            if "[m:" in line:
                for m in CITATION.finditer(line):
                    out.append(Citation(m.group("id"), self.start_line + i, m.start(), m.end()))
        return out

    @cached_property
    def tags(self) -> list[str]:
        tag_lines = [s for s in self.sections if s.spec is not None and s.spec.key == "tags"]
        if tag_lines:
            indices = [i for s in tag_lines for i in range(s.start + 1, s.end)]
            # A "**🏷️ Tags**: #a #b" label line carries tags on the same line.
            indices += [s.start for s in tag_lines]
        else:
            indices = list(range(1, len(self.lines)))
        seen: dict[str, None] = {}
        for i in sorted(indices):
            if self.fences[i]:
                continue
            line = bare(self.lines[i])
            if _HEADING.match(line) and not tag_lines:
                continue
            for m in _TAG.finditer(line):
                seen.setdefault(m.group("tag").lower(), None)
        return list(seen)

    @property
    def body(self) -> str:
        """The text for search: everything but the id comment."""
        return "".join(line for line in self.lines if not _ID_COMMENT.match(line))

    def summary(self) -> EntrySummary:
        return {
            "id": self.id,
            "title": self.title,
            "date": self.date,
            "line": self.start_line,
            "tags": self.tags,
        }


class EntrySummary(TypedDict):
    """One entry in a listing (``journal list --json``, backlinks, the view)."""

    id: str
    title: str
    date: str
    line: int  # 1-based line of the heading in the journal
    tags: list[str]


@dataclass
class Journal:
    preamble: str
    entries: list[Entry] = field(default_factory=list)

    def render(self) -> str:
        return self.preamble + "".join(e.raw for e in self.entries)

    def get(self, key: str) -> Entry | None:
        """An entry by id, by 1-based position, or by a unique title substring."""
        for entry in self.entries:
            if entry.id == key:
                return entry
        if key.isdigit() and 1 <= int(key) <= len(self.entries):
            return self.entries[int(key) - 1]
        hits = [e for e in self.entries if key.lower() in e.title.lower()]
        return hits[0] if len(hits) == 1 else None

    def ids(self) -> set[str]:
        return {e.id for e in self.entries}


# Only fence lines and level-1/2 headings matter for finding entries: one regex pass finds
# them all, so parsing a 14 MB journal does not walk its 700,000 lines in Python.
_STRUCTURE = re.compile(r"(?m)^ {0,3}(?:(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)|#{1,2}[ \t][^\n]*)$")
# The id comment: the first non-blank line within three lines under the heading.
_EXPLICIT_ID = re.compile(
    r"\A[^\n]*\n(?:[ \t]*\r?\n){0,2}"
    r"[ \t]*<!--[ \t]*entry:[ \t]*(?P<id>[^\s>]+)[ \t]*-->[ \t]*\r?(?:\n|\Z)"
)


def parse_journal(text: str) -> Journal:
    starts: list[tuple[int, str, str]] = []  # (offset of the heading, title, date)
    open_char, open_len = "", 0
    bom = 1 if text.startswith("\ufeff") else 0  # a byte-order mark does not hide line 1
    for m in _STRUCTURE.finditer(text[bom:] if bom else text):
        fence = m.group("fence")
        if fence is not None:  # same rules as fence_mask
            if not open_char:
                open_char, open_len = fence[0], len(fence)
            elif fence[0] == open_char and len(fence) >= open_len and not m.group("info").strip():
                open_char = ""
            continue
        if not open_char:
            found = entry_heading(m.group(0))
            if found:
                starts.append((m.start() + bom, *found))
    journal = Journal(preamble=text[: starts[0][0]] if starts else text)
    line, counted_to = 1, 0
    for n, (offset, title, date) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(text)
        line += text.count("\n", counted_to, offset)
        counted_to = offset
        entry = Entry(raw=text[offset:end], start_line=line, title=title, date=date)
        match = _EXPLICIT_ID.match(entry.raw)
        if match:
            entry.id, entry.explicit_id = match.group("id"), True
        journal.entries.append(entry)
    # Ids we wrote come first: an entry written by hand later with the same title and date
    # must not take the id (and so the recorded reference hashes) of one we appended.
    used: set[str] = set()
    for entry in journal.entries:
        if entry.explicit_id:
            entry.id = unique_id(entry.id, used)
            used.add(entry.id)
    for entry in journal.entries:
        if not entry.explicit_id:
            entry.id = unique_id(entry.derived_id, used)
            used.add(entry.id)
    return journal


def _explicit_id(lines: list[str]) -> str | None:
    for line in lines[1:4]:
        if not line.strip():
            continue
        match = _ID_COMMENT.match(line)
        return match.group("id") if match else None
    return None


def unique_id(base: str, used: set[str]) -> str:
    if base not in used:
        return base
    n = 2
    while f"{base}-{n}" in used:
        n += 1
    return f"{base}-{n}"


def id_comment(entry_id: str) -> str:
    return f"<!-- entry: {entry_id} -->"


def fresh_id(data: bytes, base: str, date: str) -> str:
    """An id for a new entry that no entry of the journal ``data`` has, without parsing it.

    Only headings carrying the same date can derive the same id, so we look at those lines
    alone (fast on a journal of 10,000 entries). May over-approximate: a false hit only adds
    a ``-2`` suffix.
    """
    explicit = {m.decode("utf-8", "replace") for m in _EXPLICIT_IDS_BYTES.findall(data)}
    taken: set[str] = set(explicit)
    needle = date.encode()
    pos = data.find(needle)
    while pos != -1:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        end = len(data) if end == -1 else end
        line = data[start:end]
        if line.lstrip(b" ").startswith(b"#"):
            found = entry_heading(line.decode("utf-8", errors="replace"))
            if found and found[1] == date and not _HEADING_WITH_ID_BYTES.match(data, start):
                # As parse_journal assigns it: after the explicit ids and earlier entries.
                taken.add(unique_id(f"{slugify(found[0])}-{date}", taken))
        pos = data.find(needle, end)
    return unique_id(base, taken)


_EXPLICIT_IDS_BYTES = re.compile(rb"<!--[ \t]*entry:[ \t]*([^\s>]+)[ \t]*-->")
_HEADING_WITH_ID_BYTES = re.compile(
    rb"[^\n]*\n(?:[ \t]*\r?\n){0,2}[ \t]*<!--[ \t]*entry:[ \t]*[^\s>]+[ \t]*-->[ \t]*\r?(?:\n|\Z)"
)
