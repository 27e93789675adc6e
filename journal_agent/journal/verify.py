"""``journal check``: every rule an entry must pass, as one list of problems.

Problem kinds (exactly these): ``missing_ref``, ``moved_ref``, ``stale_ref``, ``bad_citation``,
``unquoted_number``, ``missing_section``, ``encoding``, ``contradiction`` (two entries, one
configuration or code line, two values: :mod:`journal_agent.journal.disagree`), and, added by
``journal.api.check``, ``near_duplicate``.

The number rules, conservatively (see docs/journal.md, "The number rules"):

* Beside a citation ``[m:<id>]`` — in the same table row, else the same sentence (or the
  sentence before, when the citation stands alone) — every number with a memory or time unit
  must be a value of a cited record (its results or calculation steps), unit-aware and
  rounding-tolerant. In a span with ``=`` only the results after the last ``=`` are quoted,
  and a result the calculation on its left gives is derived. A table row is judged cell by
  cell; a "Calculation" cell quotes nothing.
* A citation covers its paragraph, list item or table (and a table under a cited caption
  ending in ``:``): every other number there must also be a record value, a shown calculation
  or, in a table, the sum of its column above it.
* ``unquoted_number``: any other number with a memory or time unit, outside code, on a line
  that shows no calculation (numbers with an operator between them, or ``=`` with a number
  on its left; "4× larger" and "→" are not calculations), unless it is asked in a question,
  sits in a heading or the 🔗 Related, ❓ Follow-up or 🏷️ Tags sections, or is a
  specification: a device's size (``40 GB GPUs``, ``A100-80GB``), a setting (``defaults to
  30 minutes``, ``a 64 KB bucket``), a data-type size in bytes, or zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent.errors import JournalAgentError
from journal_agent.journal import numbers
from journal_agent.journal._text import bare
from journal_agent.journal.encoding import scan, scan_text
from journal_agent.journal.model import Citation, Entry, EntrySummary, parse_journal
from journal_agent.journal.problems import CheckedEntry, CheckReport, Problem
from journal_agent.journal.quoting import (
    blank_citations,
    checked_quantities,
    cited_blocks,
    cited_spans,
    closest,
    is_column_total,
    is_device_spec,
    is_setting,
    shows_calculation,
)
from journal_agent.journal.refcheck import ref_problems
from journal_agent.journal.refs import Anchor, FileCache, RefStore
from journal_agent.journal.relocate import Relocator
from journal_agent.journal.sections import REQUIRED
from journal_agent.paths import JOURNAL_FILE, measurements_dir, refs_file
from journal_agent.record_seal import made_here, not_made_here
from profiling.citations import cite

if TYPE_CHECKING:
    from journal_agent.journal.disagree import Disagreements
    from profiling.records import MeasurementRecord

KINDS = (
    "missing_ref",
    "moved_ref",
    "stale_ref",
    "bad_citation",
    "unquoted_number",
    "missing_section",
    "encoding",
    "contradiction",
    "near_duplicate",
)
_EXEMPT_SECTIONS = {"related", "follow_up", "tags"}
_CODE_SPAN = re.compile(r"(`+).+?\1")
_DIGIT = re.compile(r"\d")
_QUESTION_REST = re.compile(r"[^.!;?]*\?")


class Records:
    """Measurement records by id, loaded once per check (``profiling.records``)."""

    def __init__(self, root: Path) -> None:
        from profiling.records import RecordStore

        self.store = RecordStore(measurements_dir(root))
        self._cache: dict[str, list[tuple[str, float, str]] | str] = {}
        self._records: dict[str, MeasurementRecord | None] = {}

    def record(self, record_id: str) -> MeasurementRecord | None:
        """The record, or None when there is none or it is corrupt."""
        if record_id not in self._records:
            try:
                self._records[record_id] = self.store.load(record_id)
            except (KeyError, ValueError):
                self._records[record_id] = None
        return self._records[record_id]

    def values(self, record_id: str) -> list[tuple[str, float, str]] | str:
        """``[(name, value, unit)]`` of the record's results and steps, or why it is unusable."""
        if record_id not in self._cache:
            try:
                record = self.store.load(record_id)
                # A record a clone committed (or another hand changed) is no measurement of
                # yours: refused until adopted on your terminal (journal_agent.record_seal).
                self._cache[record_id] = (
                    [(q.name, q.value, q.unit) for q in record.results]
                    + [(s.name, s.value, s.unit) for s in record.steps]
                    if made_here(record)
                    else not_made_here(record_id)
                )
            except KeyError:
                self._cache[record_id] = (
                    f"{cite(record_id)} does not resolve to a measurement record in "
                    f"{self.store.directory}"
                )
            except ValueError as exc:
                self._cache[record_id] = f"{cite(record_id)}: {exc}"
        return self._cache[record_id]


class Checker:
    def __init__(self, root: Path, *, recorded_hashes: bool = True) -> None:
        self.root = Path(root)
        self.files = FileCache(self.root)
        self.relocator = Relocator(self.root, self.files)
        self.records = Records(self.root)
        # A draft has no recorded anchors (and may share a derived id with an old entry).
        self.anchors: Mapping[str, dict[str, Anchor]] = {}
        if recorded_hashes:
            from journal_agent.foreign_changes import check as check_foreign

            # Anchors another hand changed (a forged hash makes a stale reference look fresh)
            # are reported once, as a changed journal is.
            check_foreign(self.root, str(refs_file(self.root).relative_to(self.root)))
            self.anchors = RefStore(refs_file(self.root)).anchors_on_disk()

    def close(self) -> None:
        """Let go of refs.jsonl (its anchors are read when an entry is checked)."""
        close = getattr(self.anchors, "close", None)
        if close is not None:
            close()

    def contradictions(self, entries: Iterable[Entry]) -> list[Problem]:
        """Entries stating different values for one configuration or one code line."""
        found = self.disagreements()
        for entry in entries:
            found.add(entry)
        return found.problems()

    def disagreements(self) -> Disagreements:
        """What each entry says, to be given the entries as they are read."""
        from journal_agent.journal.disagree import Disagreements

        return Disagreements(self.records.record, self.files, self.anchors)

    # -- one entry ---------------------------------------------------------------------------
    def check_entry(self, entry: Entry) -> list[Problem]:
        problems: list[Problem] = []
        problems += self._sections(entry)
        problems += self._refs(entry)
        problems += self._citations(entry)
        problems += self._unquoted(entry)
        problems += _integrity(entry)
        return problems

    def _sections(self, entry: Entry) -> list[Problem]:
        present = entry.section_keys()
        return [
            Problem(
                entry.id,
                "missing_section",
                f"required section {spec.number}. {spec.title} is missing "
                f"(add a '### {spec.title}' heading or a '**{spec.title}**:' line)",
                entry.start_line,
            )
            for spec in REQUIRED
            if spec.key not in present
        ]

    def _refs(self, entry: Entry) -> list[Problem]:
        return ref_problems(entry, self.anchors.get(entry.id, {}), self.relocator)

    def _values(self, ids: list[str]) -> list[tuple[str, float, str]]:
        """The values of the cited records that load (a citation of a missing or corrupt
        record is reported on its own)."""
        out: list[tuple[str, float, str]] = []
        for rid in ids:
            values = self.records.values(rid) if rid else None
            if values is not None and not isinstance(values, str):
                out += values
        return out

    def _citations(self, entry: Entry) -> list[Problem]:
        problems: list[Problem] = []
        by_line: dict[int, list[Citation]] = {}
        for cit in entry.citations:
            by_line.setdefault(cit.line, []).append(cit)
        for lineno, cits in by_line.items():
            line = bare(entry.lines[lineno - entry.start_line])
            for cit in cits:
                values = self.records.values(cit.record_id) if cit.record_id else None
                if values is None or isinstance(values, str):
                    detail = values or "[m:] has no record id; cite a record as [m:<id>]"
                    problems.append(Problem(entry.id, "bad_citation", detail, lineno))
            for start, end, ids in cited_spans(line, cits):
                values = self._values(ids)
                if not values:
                    continue
                for quoted in checked_quantities(blank_citations(line), start, end):
                    if any(numbers.matches(quoted, v, u) for _, v, u in values):
                        continue
                    problems.append(
                        Problem(
                            entry.id,
                            "bad_citation",
                            f"{quoted.text} beside {', '.join(map(cite, ids))} is "
                            f"not a value of the cited record{'s' if len(ids) > 1 else ''}"
                            f"{closest(quoted, values)}",
                            lineno,
                        )
                    )
        return problems

    def _unquoted(self, entry: Entry) -> list[Problem]:
        problems: list[Problem] = []
        exempt = set()
        for section in entry.sections:
            if section.spec is not None and section.spec.key in _EXEMPT_SECTIONS:
                exempt.update(range(section.start, section.end))
        blocks = cited_blocks(entry)
        for i in range(1, len(entry.lines)):
            if entry.fences[i] or i in exempt:
                continue
            raw = entry.lines[i]
            if not _DIGIT.search(raw):
                continue
            # Inline code is blanked (same length, so columns stay those of the line).
            line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), bare(raw))
            if not _DIGIT.search(line) or line.lstrip().startswith("#"):
                continue
            found = [
                q
                for q in numbers.find_quantities(line)
                if not is_device_spec(line, q)
                and not is_setting(line, q)
                and not _QUESTION_REST.match(line, q.end)  # asked, not claimed
            ]
            if not found or shows_calculation(line):
                continue
            lineno = entry.start_line + i
            if i not in blocks:
                shown = ", ".join(f"'{q.text}'" for q in found[:4])
                problems.append(
                    Problem(
                        entry.id,
                        "unquoted_number",
                        f"{shown} has no measurement citation [m:<id>] and no calculation "
                        "shown on its line; cite the record it came from or show the steps",
                        lineno,
                    )
                )
                continue
            # In a paragraph, list item or table that cites a record, a number that is not
            # checked beside its citation must still be a value of the cited records.
            ids, is_table, first = blocks[i]
            values = self._values(ids)
            if not values:
                continue
            own = [c for c in entry.citations if c.line == lineno]
            checked = [(a, b) for a, b, _ in cited_spans(bare(raw), own)] if own else []
            wrong = [
                q
                for q in found
                if not any(a <= q.start < b for a, b in checked)
                and not any(numbers.matches(q, v, u) for _, v, u in values)
                and not (is_table and is_column_total(entry, first, i, line, q))
            ]
            if not wrong:
                continue
            cited = ", ".join(map(cite, ids))
            shown = ", ".join(f"'{q.text}'" for q in wrong[:4])
            if is_table:
                nearest = closest(wrong[0], values)
                kind = "bad_citation"
                detail = (
                    f"{shown} in a table citing {cited} is not a value of the cited "
                    f"record{'s' if len(ids) > 1 else ''}{nearest}; fix the number, cite its "
                    "own record or show its calculation"
                )
            else:
                kind = "unquoted_number"
                detail = (
                    f"{shown} has no citation of its own and is not a value of {cited} cited "
                    "in its paragraph; cite the record it came from or show the steps"
                )
            problems.append(Problem(entry.id, kind, detail, lineno))
        return problems


# -- whole journal / drafts ------------------------------------------------------------------


# Control characters no one types: NUL and friends (tab, newline, carriage return and form feed
# are ordinary). A NUL truncates the text in many tools and breaks the search index.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _integrity(entry: Entry) -> list[Problem]:
    """A date that is not a calendar date (2026-13-45) and control characters (a NUL byte)."""
    problems = []
    try:
        date.fromisoformat(entry.date)
    except ValueError:
        problems.append(
            Problem(
                entry.id,
                "bad_date",
                f"{entry.date} in the heading is not a calendar date; write it as YYYY-MM-DD",
                entry.start_line,
            )
        )
    for n, line in enumerate(entry.raw.splitlines()):
        if m := _CONTROL.search(line):
            problems.append(
                Problem(
                    entry.id,
                    "control_char",
                    f"the line holds the control character U+{ord(m.group()):04X}"
                    f"{' (NUL)' if m.group() == chr(0) else ''}; delete it",
                    entry.start_line + n,
                )
            )
    return problems


def check_journal(root: Path) -> CheckReport:
    """Every problem of the journal, read an entry at a time (memory bounded by one entry and
    the report, not the journal: a 100 MB journal read whole took 1.9 GB)."""
    from journal_agent import confined
    from journal_agent.foreign_changes import check as check_foreign
    from journal_agent.journal.stream import JournalFile

    path = Path(root) / JOURNAL_FILE
    check_foreign(Path(root), JOURNAL_FILE)
    # Never through a link: confined.Refused says what to do.
    f = confined.open_read(root, path)
    if f is None:
        return CheckReport(ok=True)
    checker = Checker(root)
    problems: list[Problem] = []
    summaries: list[EntrySummary] = []
    with JournalFile(path, file=f, errors="replace", owned=True) as journal:
        preamble = journal.preamble_bytes()
        problems += _encoding("(preamble)", preamble, 1)
        text = preamble.decode("utf-8", "replace")
        if text.strip():
            problems += _secrets("(preamble)", 1, text)
        said = checker.disagreements()
        for span in journal.outline.spans:
            problems += _encoding(span.id, journal.bytes_of(span), span.line)
            entry = journal.entry(span)
            problems += checker.check_entry(entry)
            problems += _secrets(entry.id, entry.start_line, entry.raw)
            summaries.append(entry.summary())
            said.add(entry)  # (each entry read and parsed once)
        problems += said.problems()
    checker.close()
    counts: dict[str, int] = {}
    for p in problems:
        counts[p.entry] = counts.get(p.entry, 0) + 1
    entries: list[CheckedEntry] = [{**e, "problems": counts.get(e["id"], 0)} for e in summaries]
    problems.sort(key=lambda p: (p.line or 0, p.kind))
    return CheckReport(ok=not problems, entries=entries, problems=problems)


def _encoding(owner: str, data: bytes, first_line: int) -> list[Problem]:
    """Invalid UTF-8 and double-encoded text in one entry's bytes (or the preamble's)."""
    return [
        Problem(owner, "encoding", issue.detail, issue.line)
        for issue in scan(data, first_line=first_line)
    ]


def _secrets(owner: str, start: int, raw: str) -> list[Problem]:
    """A ``secret`` problem for each line that holds what looks like one (secret_text's one
    detector): our writers refuse them, but an editor, git or a command may have put one in."""
    from journal_agent.secret_text import find_secrets

    return [
        Problem(
            owner,
            "secret",
            f"the line holds what looks like {'an' if found.kind[:1].lower() in 'aeiou' else 'a'} "
            f"{found.kind}; remove it, or quote it redacted "
            "(`[REDACTED]`), and rotate it if the file was shared",
            start + found.line - 1,
        )
        for found in find_secrets(raw)
    ]


def contradictions_in(root: Path, entries: Iterable[Entry]) -> list[Problem]:
    """The ``contradiction`` problems of these entries (``journal_agent.journal.disagree``)."""
    return Checker(root).contradictions(entries)


class DraftError(JournalAgentError, ValueError):
    """The text is not one entry (no dated heading, or several entries)."""


def parse_draft(text: str) -> Entry:
    journal = parse_journal(text)
    if not journal.entries:
        raise DraftError(
            "the entry has no heading with its title and date; start it with a line such as "
            "'## ZeRO Stage 2 (2026-11-21)'"
        )
    if len(journal.entries) > 1:
        raise DraftError(
            f"the text holds {len(journal.entries)} entries (dated headings at lines "
            f"{', '.join(str(e.start_line) for e in journal.entries)}); append one at a time"
        )
    if journal.preamble.strip():
        raise DraftError("the entry has text before its heading; start with the dated heading")
    return journal.entries[0]


def validate_draft(root: Path, text: str) -> tuple[Entry, list[Problem]]:
    """Parse a draft entry and check it as ``journal check`` would (lines are the draft's)."""
    entry = parse_draft(text)
    checker = Checker(root, recorded_hashes=False)
    problems = [
        Problem(entry.id, "encoding", i.detail, i.line) for i in scan_text(text)
    ] + checker.check_entry(entry)
    problems.sort(key=lambda p: (p.line or 0, p.kind))
    return entry, problems
