"""``ledger check``: what ``journal check`` finds for entries, for the ledger, plus structure.

Problem kinds (exactly these):

* ``unsourced_number`` — an archived insight quotes a number with a memory or time unit (by
  the journal's number rules: not a calculation shown, not a device size or a setting) and
  names no source: neither a measurement ``[m:<id>]`` nor a journal entry ``[entry:<id>]``.
* ``bad_citation`` — a ``[m:<id>]`` anywhere in the ledger that names no measurement record.
* ``missing_entry`` — an ``[entry:<id>]`` anywhere in the ledger that names no journal entry.
* ``structure`` — what makes the ledger unreadable to the updates and the review: no title or
  no ``**Last Updated:**`` date, a section of the example ledger missing or twice, a session
  row that is not ``| YYYY-MM-DD | topic | outcome |``, the bold row not the newest, a
  malformed checkbox, an insight heading without its date or quotation, an item listed at two
  mastery levels, a date in the future of ``Last Updated``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent.journal._text import bare
from journal_agent.learning.ledger import (
    SECTIONS,
    Ledger,
    normalize,
)
from journal_agent.learning.ledger_lines import bad_checkbox, is_date

if TYPE_CHECKING:
    from journal_agent.journal.stream import JournalFile, Span
    from journal_agent.journal.verify import Records
    from journal_agent.learning.ledger_summary import LedgerSummary

KINDS = ("unsourced_number", "bad_citation", "missing_entry", "structure")
ENTRY_REF = re.compile(r"\[entry:(?P<id>[^\]\s]*)\]")
CITATION_TEXT = re.compile(r"\[(?:m|entry):[^\]\s]*\]")  # blanked before finding numbers
_CODE_SPAN = re.compile(r"(`+).+?\1")
_SECTION_NAMES = {
    "knowledge": "🧠 Knowledge Graph",
    "actions": "📉 Action Items & Review Queue",
    "sessions": "📚 Session History",
    "goals": "🎯 Course Goals",
    "insights": "💡 Key Insights Archive",
}


@dataclass
class LedgerProblem:
    kind: str
    detail: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LedgerReport:
    ok: bool
    problems: list[LedgerProblem] = field(default_factory=list)
    summary: LedgerSummary | None = None  # None: no ledger to summarise

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "counts": self.summary["counts"] if self.summary is not None else {},
        }


def claimed_quantities(text: str) -> list:
    """The numbers with a memory or time unit a text claims (``numbers.Quoted``), by the
    journal's rules: not in code, not on a line that shows its calculation, not a device size
    or a setting."""
    from journal_agent.journal import numbers
    from journal_agent.journal.verify import is_device_spec, is_setting, shows_calculation

    found = []
    for raw in text.splitlines():
        line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), CITATION_TEXT.sub("", raw))
        if shows_calculation(line):
            continue
        found += [
            q
            for q in numbers.find_quantities(line)
            if not is_device_spec(line, q) and not is_setting(line, q)
        ]
    return found


def insight_problems(sources: SourceChecker, quote: str, refs: list[str]) -> list[tuple[str, str]]:
    """``(kind, detail)`` for an insight's numbers: no source at all, or a number found in none
    of its sources — a value of a cited record, or a number written in a cited journal entry
    (unit-aware and rounded as written, as ``journal check`` does beside a citation)."""
    from journal_agent.journal import numbers

    claimed = claimed_quantities(quote)
    if not claimed:
        return []
    if not refs:
        shown = ", ".join(f"'{q.text}'" for q in claimed[:4])
        return [
            (
                "unsourced_number",
                f"quotes {shown} with no source; add the measurement [m:<id>] or the journal "
                "entry [entry:<id>] it came from",
            )
        ]
    values: list[tuple[str, float, str]] = []
    for ref in refs:
        kind, _, ident = ref[1:-1].partition(":")
        if kind == "m":
            if sources.record_problem(ident):
                return []  # the citation itself is reported as bad_citation
            values += sources.record_values(ident)
        else:
            if sources.entry_problem(ident):
                return []  # reported as missing_entry
            values += sources.entry_values(ident)
    wrong = [q for q in claimed if not any(numbers.matches(q, v, u) for _, v, u in values)]
    if not wrong:
        return []
    cited = ", ".join(refs)
    shown = ", ".join(f"'{q.text}'" for q in wrong[:4])
    return [
        (
            "bad_citation",
            f"quotes {shown}, which {'is' if len(wrong) == 1 else 'are'} in none of its "
            f"sources ({cited}); fix the number or its source",
        )
    ]


class SourceChecker:
    """Resolves ``[m:<id>]`` against the measurement records and ``[entry:<id>]`` against the
    journal, each read once: the journal's outline (ids and places), then only the entries
    cited (a 100 MB journal parsed whole took a gigabyte). Close it when done (``with``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._records: Records | None = None
        self._journal_file: JournalFile | None = None
        self._spans: dict[str, Span] | None = None

    def __enter__(self) -> SourceChecker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._journal_file is not None:
            self._journal_file.close()
            self._journal_file = None

    def _record_values(self, record_id: str) -> list[tuple[str, float, str]] | str:
        if self._records is None:
            from journal_agent.journal.verify import Records

            self._records = Records(self.root)
        return self._records.values(record_id)

    def record_problem(self, record_id: str) -> str | None:
        if not record_id:
            return "[m:] has no record id; cite a record as [m:<id>]"
        values = self._record_values(record_id)
        return values if isinstance(values, str) else None

    def record_values(self, record_id: str) -> list[tuple[str, float, str]]:
        values = self._record_values(record_id) if record_id else []
        return [] if isinstance(values, str) else values

    def _journal(self) -> dict[str, Span]:
        if self._spans is None:
            from journal_agent.journal.store import JournalStore

            store = JournalStore(self.root)
            if store.exists():
                self._journal_file = store.stream()
                spans = self._journal_file.outline.spans
            else:
                spans = []
            self._spans = {span.id: span for span in spans}  # (ids are unique, as parsed)
        return self._spans

    def entry_values(self, entry_id: str) -> list[tuple[str, float, str]]:
        """The numbers with a unit written in an entry (its own text, code included)."""
        from journal_agent.journal import numbers

        span = self._journal()[entry_id]
        assert self._journal_file is not None, "an entry was found, so the journal is open"
        entry = self._journal_file.entry(span)
        return [(q.text, q.value, q.unit) for q in numbers.find_quantities(entry.raw)]

    def entry_problem(self, entry_id: str) -> str | None:
        from journal_agent.learning.ledger_edit import entry_ref

        if entry_id in self._journal():
            return None
        return (
            f"{entry_ref(entry_id)} names no entry of learning_journal.md; use an id from "
            "`journal-agent journal list --json`"
        )


def check_ledger(root: Path, ledger: Ledger) -> LedgerReport:
    problems: list[LedgerProblem] = []
    problems += _structure(ledger)
    with SourceChecker(root) as sources:
        problems += _references(ledger, sources)
        for insight in ledger.insights():
            refs = CITATION_TEXT.findall(insight.text)
            for kind, detail in insight_problems(sources, insight.quote, refs):
                problems.append(
                    LedgerProblem(kind, f"insight '{insight.title}' {detail}", insight.lineno)
                )
    problems.sort(key=lambda p: (p.line or 0, p.kind))
    return LedgerReport(ok=not problems, problems=problems, summary=ledger.summary())


def _references(ledger: Ledger, sources: SourceChecker) -> list[LedgerProblem]:
    from profiling.citations import CITATION

    problems = []
    fences = ledger.fences()
    for i, line in enumerate(ledger.lines):
        if fences[i] or "[" not in line:
            continue
        for m in CITATION.finditer(line):
            why = sources.record_problem(m.group("id"))
            if why:
                problems.append(LedgerProblem("bad_citation", why, i + 1))
        for m in ENTRY_REF.finditer(line):
            why = sources.entry_problem(m.group("id"))
            if why:
                problems.append(LedgerProblem("missing_entry", why, i + 1))
    return problems


def _structure(ledger: Ledger) -> list[LedgerProblem]:
    """Each structural rule is a small function yielding ``(detail, line)``."""
    rules = (_header, _sections, _checkboxes, _session_rows, _insight_blocks, _items_twice)
    return [
        LedgerProblem("structure", detail, line) for rule in rules for detail, line in rule(ledger)
    ]


Found = Iterator[tuple[str, int | None]]


def _header(ledger: Ledger) -> Found:
    if ledger.title_index is None:
        yield "the ledger has no '# <Course> Learning Ledger' title line", 1
    if ledger.last_updated is None:
        yield (
            "no '**Last Updated:** YYYY-MM-DD' line under the title; add one",
            (ledger.updated_index or ledger.title_index or 0) + 1,
        )


def _sections(ledger: Ledger) -> Found:
    from journal_agent.learning.ledger import _SECTION_SIGNS, _identify

    for key in SECTIONS:
        if ledger.section(key) is None:
            yield (
                f"no {_SECTION_NAMES[key]} section; `journal-agent ledger` updates create it, "
                "or add the heading by hand",
                None,
            )
    # A second section with a known name is kept but never edited: say so.
    for span in ledger.sections:
        key = _identify(span.title, _SECTION_SIGNS) if span.key is None else None
        first = ledger.section(key) if key else None
        if first is not None and first.start < span.start:
            yield (
                f"section '{span.title}' repeats '{first.title}' (line {first.lineno}); "
                "updates only go to the first — merge them",
                span.lineno,
            )


def _checkboxes(ledger: Ledger) -> Found:
    fences = ledger.fences()
    for i, line in enumerate(ledger.lines):
        if not fences[i] and bad_checkbox(line):
            yield (
                f"'{bare(line).strip()[:40]}' is not a checkbox markdown renders; write "
                "'- [ ] text' or '- [x] text'",
                i + 1,
            )


def _session_rows(ledger: Ledger) -> Found:
    rows = ledger.sessions()
    for row in rows:
        if len(row.cells) != 3:
            yield (
                f"session row has {len(row.cells)} cells; write '| YYYY-MM-DD | topic | "
                "key outcome |'",
                row.lineno,
            )
        elif not is_date(row.date):
            yield f"session date {row.date!r} is not YYYY-MM-DD", row.lineno
    dated = [r for r in rows if is_date(r.date)]
    if not dated:
        return
    newest = max(dated, key=lambda r: (r.date, r.index))
    bold = [r for r in rows if r.bold]
    if bold and (len(bold) > 1 or bold[0] is not newest):
        yield (
            f"the bold session row should be the newest one only ({newest.date}, line "
            f"{newest.lineno}); bold rows are at line(s) " + ", ".join(str(r.lineno) for r in bold),
            bold[0].lineno,
        )
    updated = ledger.last_updated
    if updated and newest.date > updated:
        yield (
            f"Last Updated ({updated}) is older than the newest session ({newest.date})",
            (ledger.updated_index or 0) + 1,
        )


def _insight_blocks(ledger: Ledger) -> Found:
    for insight in ledger.insights():
        if insight.date is None:
            yield (
                f"insight heading '{insight.title}' has no date; write '### YYYY-MM-DD: <title>'",
                insight.lineno,
            )
        if not insight.quote.strip():
            yield f"insight '{insight.title}' has no '> ' quotation under it", insight.lineno


def _items_twice(ledger: Ledger) -> Found:
    seen: dict[str, tuple[str, int]] = {}
    for item in ledger.items():
        key = normalize(item.text)
        if key in seen and seen[key][0] != item.level:
            level, line = seen[key]
            yield (
                f"'{item.text[:50]}' is listed under {_level(item.level)} and under "
                f"{_level(level)} (line {line}); keep one",
                item.lineno,
            )
        seen.setdefault(key, (item.level, item.lineno))


def _level(key: str) -> str:
    return {"mastered": "🟢 Mastered", "developing": "🟡 Developing"}.get(key, "🔴 Blind Spots")
