"""Entries that disagree: two entries stating different values for the same thing.

- **the same configuration**: two records of one kind (two estimates, two traces …) made for
  the same configuration, each quoted by an entry for the same quantity, with values that do
  not round to each other (an estimate made before the estimator changed, say);
- **the same code lines**: two entries citing overlapping lines of a file, each saying what a
  name of those lines is (``lr = 3e-4``, ``"stage": 2``, ``betas (0.9, 0.95)``) in the
  paragraph that cites them, with different numbers; the code's own value is named too.

Numbers beside a citation are the record values ``journal check`` matched them to
(:func:`quoted_values`, which the number cards of ``journal_agent.learning`` use as well).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal_agent.journal import numbers
from journal_agent.journal._text import bare
from journal_agent.journal.model import Entry
from journal_agent.journal.problems import Problem

if TYPE_CHECKING:
    from journal_agent.journal.refs import FileCache
    from profiling.records import MeasurementRecord

# Settings that say how a record was made, not what was estimated or measured.
_NOT_CONFIG = frozenset(["command", "argv", "cwd", "shape"])
_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
_IDENT = re.compile(r"[A-Za-z_]\w{1,40}")
# Between a name and its value in prose: "lr = 3e-4", "betas are (0.9, 0.95)", "lr at 3e-4".
_SAYS = r"\b(?:is|are|was|were|of|to|at|equals?|becomes?)\b"
_NUMBERS = rf"[(\[]?\s*({_NUMBER}(?:\s*,\s*{_NUMBER})*)[)\]]?"
# What prose says a name is ("lr = 3e-4", "`betas` are (0.9, 0.95)"), and what code assigns it.
# (After the name, a word character can only be a digit, the value's: the lookahead says so,
# sparing the search a try of every shorter name at every word. The same matches.)
_STATED = re.compile(
    rf"(?<![\w.])[`'\"]?([A-Za-z_]\w{{1,40}})(?![^\W\d])[`'\"]?\s*(?:=|:|{_SAYS})?\s*{_NUMBERS}"
)
_ASSIGNED = re.compile(rf"(?<![\w.])[\"']?([A-Za-z_]\w{{1,40}})[\"']?\s*[=:]\s*{_NUMBERS}")
_COMPARED = 50  # earlier statements of one name an entry's statement is compared with
_NOT_NAMES = frozenset(
    (
        *("def", "class", "return", "self", "import", "from", "for", "in", "if", "else", "elif"),
        *("while", "with", "as", "and", "or", "not", "none", "true", "false", "lambda", "the"),
    )
)


@dataclass(frozen=True)
class Quote:
    entry: str
    line: int  # in the journal
    record: MeasurementRecord
    quantity: str  # the record's name for the value
    value: float
    unit: str
    quoted: numbers.Quoted  # as the entry writes it
    sentence: tuple[int, int]  # the columns of the line checked against the citation
    text: str  # the line, citations blanked


def quoted_values(
    entry: Entry, record_of: Callable[[str], MeasurementRecord | None]
) -> Iterator[Quote]:
    """Each number the entry quotes beside a citation, with the record value it is."""
    from journal_agent.journal.quoting import blank_citations, checked_quantities, cited_spans

    by_line: dict[int, list] = defaultdict(list)
    for cit in entry.citations:
        by_line[cit.line].append(cit)
    for lineno, cits in by_line.items():
        i = lineno - entry.start_line
        if not 0 <= i < len(entry.lines) or entry.fences[i]:
            continue
        line = bare(entry.lines[i])
        blank = blank_citations(line)
        for start, end, ids in cited_spans(line, cits):
            for quoted in checked_quantities(blank, start, end):
                for record_id in ids:
                    record = record_of(record_id)
                    match = None if record is None else _value(record, quoted)
                    if record is not None and match is not None:
                        name, value, unit = match
                        yield Quote(
                            entry.id, lineno, record, name, value, unit, quoted, (start, end), line
                        )
                        break


def _value(record: MeasurementRecord, quoted: numbers.Quoted) -> tuple[str, float, str] | None:
    for q in record.results:
        if numbers.matches(quoted, q.value, q.unit):
            return q.name, q.value, q.unit
    return None


def _config_key(record: MeasurementRecord) -> str:
    config = {k: v for k, v in record.config.items() if k not in _NOT_CONFIG and v is not None}
    return json.dumps(config, sort_keys=True, default=str)


class Disagreements:
    """What each entry says, gathered as a check reads the entries (once: ``journal check``
    of a 100 MB journal read and parsed every entry three times, twice for this), then the
    ``contradiction`` problems (:meth:`problems`)."""

    def __init__(
        self,
        record_of: Callable[[str], MeasurementRecord | None],
        files: FileCache,
        anchors: Mapping[str, dict],
    ) -> None:
        self.record_of, self.files, self.anchors = record_of, files, anchors
        self.quotes: dict[tuple[str, str, str], list[Quote]] = defaultdict(list)
        self.said: dict[tuple[str, str], list[_Said]] = defaultdict(list)

    def add(self, entry: Entry) -> None:
        for quote in quoted_values(entry, self.record_of):
            if not _configured(quote.record):
                continue  # a record that keeps no configuration says of what it is nothing
            key = (quote.record.kind, _config_key(quote.record), quote.quantity)
            self.quotes[key].append(quote)
        for item in _statements(entry, self.files, self.anchors.get(entry.id, {})):
            self.said[(item.path, item.name)].append(item)

    def problems(self) -> list[Problem]:
        return _by_configuration(self.quotes) + _by_code(self.said, self.files)


def _by_configuration(groups: dict[tuple[str, str, str], list[Quote]]) -> list[Problem]:
    """Quotes grouped by what they are of (kind, configuration, quantity), then by value:
    each entry whose value differs from the group's first is reported once, against the first
    entry that quoted that (linear in the quotes)."""
    out = []
    reported: set[str] = set()
    for quotes in groups.values():
        first = quotes[0]
        for quote in quotes[1:]:
            if quote.entry == first.entry or quote.entry in reported:
                continue
            if quote.record.id == first.record.id or _agree(first, quote):
                continue
            reported.add(quote.entry)
            out.append(
                Problem(
                    quote.entry,
                    "contradiction",
                    f"{quote.quoted.text} for {quote.quantity} [m:{quote.record.id}] disagrees "
                    f"with {first.quoted.text} in {first.entry} (line {first.line}) "
                    f"[m:{first.record.id}]: two {first.record.kind} records of the same "
                    f"configuration ({first.record.title}); make the record again and correct "
                    "the entry that is wrong",
                    quote.line,
                    other=first.entry,
                )
            )
    return out


def _configured(record: MeasurementRecord) -> bool:
    return any(v is not None for k, v in record.config.items() if k not in _NOT_CONFIG)


def _agree(a: Quote, b: Quote) -> bool:
    return numbers.matches(a.quoted, b.value, b.unit) or numbers.matches(b.quoted, a.value, a.unit)


@dataclass(frozen=True)
class _Said:
    entry: str
    line: int
    path: str
    start: int
    end: int
    name: str
    values: tuple[float, ...]
    text: str  # as written ("lr = 3e-4")


def _by_code(said: dict[tuple[str, str], list[_Said]], files: FileCache) -> list[Problem]:
    """Statements grouped by file and name; each entry is compared with the earlier statements
    of overlapping lines (at most :data:`_COMPARED` of them) and reported once."""
    out = []
    reported: set[str] = set()
    for (path, name), items in said.items():
        for k, b in enumerate(items):
            if b.entry in reported:
                continue
            earlier = [a for a in items[:k] if a.entry != b.entry][-_COMPARED:]
            a = next(
                (
                    a
                    for a in earlier
                    if not (a.end < b.start or b.end < a.start) and not _same(a.values, b.values)
                ),
                None,
            )
            if a is None:
                continue
            reported.add(b.entry)
            code = _in_code(files, path, a, b, name)
            lines = f"{path}:{b.start}" + (f"-{b.end}" if b.end != b.start else "")
            out.append(
                Problem(
                    b.entry,
                    "contradiction",
                    f"`{b.text}` for {lines} disagrees with `{a.text}` in "
                    f"{a.entry} (line {a.line}), which cites the same lines{code}; correct the "
                    "entry that is wrong",
                    b.line,
                    other=a.entry,
                )
            )
    return out


def _statements(entry: Entry, files: FileCache, anchors: dict) -> Iterator[_Said]:
    """What the paragraph citing each reference says the cited lines' names are."""
    stated: dict[tuple[int, int], list[tuple[str, str, str]]] = {}
    for ref in entry.refs:
        anchor = anchors.get(ref.key)
        cited = list(anchor.text) if anchor is not None and anchor.text else None
        if cited is None:
            lines = files.lines(ref.path)
            if lines is None or ref.end > len(lines):
                continue
            cited = [x.decode("utf-8", "replace") for x in lines[ref.start - 1 : ref.end]]
        names = {n for n in _IDENT.findall("\n".join(cited)) if n.lower() not in _NOT_NAMES}
        bounds = _paragraph_at(entry, ref.line - entry.start_line)
        if bounds not in stated:  # (the references of one paragraph share its statements)
            stated[bounds] = [
                (m.group(1), m.group(2), m.group(0))
                for m in _STATED.finditer(_paragraph_text(entry, *bounds))
            ]
        seen: set[str] = set()
        for name, numbers_text, whole in stated[bounds]:
            if name not in names or name in seen:
                continue
            seen.add(name)
            values = tuple(float(v) for v in re.findall(_NUMBER, numbers_text))
            text = " ".join(whole.replace("`", "").split())
            yield _Said(entry.id, ref.line, ref.path, ref.start, ref.end, name, values, text)


def _paragraph_at(entry: Entry, i: int) -> tuple[int, int]:
    """The lines of the paragraph, list item or table row around the entry's line ``i``
    (outside code): first and last."""
    lines = entry.lines
    start = i
    while start > 0 and lines[start - 1].strip() and not entry.fences[start - 1]:
        start -= 1
    end = i
    while end + 1 < len(lines) and lines[end + 1].strip() and not entry.fences[end + 1]:
        end += 1
    return start, end


def _paragraph_text(entry: Entry, start: int, end: int) -> str:
    """Those lines' text, with code references taken out (``train.py:5`` is no statement that
    ``py`` is 5)."""
    from journal_agent.journal.refs import _REF

    return _REF.sub(" ", " ".join(bare(x) for x in entry.lines[start : end + 1]))


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    n = min(len(a), len(b))
    return all(
        abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1.0) for x, y in zip(a[:n], b[:n], strict=True)
    )


def _in_code(files: FileCache, path: str, a: _Said, b: _Said, name: str) -> str:
    """ ", and the code says lr=3e-4" when the cited lines assign the name a value."""
    lines = files.lines(path) or []
    text = "\n".join(
        x.decode("utf-8", "replace") for x in lines[min(a.start, b.start) - 1 : max(a.end, b.end)]
    )
    found = next((m for m in _ASSIGNED.finditer(text) if m.group(1) == name), None)
    if found is None:
        return ""
    values = tuple(float(v) for v in re.findall(_NUMBER, found.group(2)))
    agrees = [s.entry for s in (a, b) if _same(s.values, values)]
    shown = " ".join(found.group(0).split())
    return f"; the code says `{shown}`" + (f", as {agrees[0]} does" if len(agrees) == 1 else "")
