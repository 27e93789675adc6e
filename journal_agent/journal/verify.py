"""``journal check``: every rule an entry must pass, as one list of problems.

Problem kinds (exactly these): ``missing_ref``, ``stale_ref``, ``bad_citation``,
``unquoted_number``, ``missing_section``, ``encoding``.

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
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from journal_agent.errors import JournalAgentError
from journal_agent.journal import numbers
from journal_agent.journal._text import bare
from journal_agent.journal.encoding import scan, scan_text
from journal_agent.journal.model import Citation, Entry, Journal, parse_journal
from journal_agent.journal.refs import FileCache, RefStore, content_hash, resolve_problem
from journal_agent.journal.sections import REQUIRED
from journal_agent.paths import JOURNAL_FILE, measurements_dir, state_dir
from profiling.records import CITATION, cite

KINDS = (
    "missing_ref",
    "stale_ref",
    "bad_citation",
    "unquoted_number",
    "missing_section",
    "encoding",
)
_EXEMPT_SECTIONS = {"related", "follow_up", "tags"}
# A calculation is an operator between two numeric operands ("7B × 2 bytes", "56 GB / 2",
# "(28 GB) + (28 GB)"); "4× larger" or "→ IMPOSSIBLE" are not calculations.
_OPERATION = re.compile(
    r"(?:(?<![\w.])\d[\w.%]*|\))(?:\s?[A-Za-zµμ]+\)?)?\s*(?:[*/+×÷·⋅]|\sx\s|\s[-−–]\s)\s*[\d(]"
)
# ... or an "=" / "≈" with a number on its left ("Total = 14 + 56 = 70 GB"), where a number
# inside a name ("Llama-2-7B", "fp16", "A100") does not count: "Optimizer = 56 GB" shows nothing.
_EQUALS = re.compile(r"[=≈]")
_LEFT_NUMBER = re.compile(r"(?<![\w.-])\d")
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"[.!?;](?=\s)")
_DIGIT = re.compile(r"\d")
_DEVICE_SIZE = re.compile(r"[\s-]?(?:GPUs?|cards?|VRAM|HBM|devices?)\b")
# A size right after a GPU model names the model's memory: "A100-40GB", "an H100 with 80 GB".
_DEVICE_BEFORE = re.compile(
    r"\b(?:[AHBLVPT]\d{1,4}[A-Z]?|A10G|L40S?|RTX[\s-]?\d{4}\w*|MI\d{3}X?|TPU\s?v\d\w*)"
    r"(?:[\s-]|\s(?:with|has|of)\s|\s?\()$"
)


# A setting or a spec, not a result: "defaults to 30 minutes", "set it to 10 min", "every
# 500 steps (about every 20 minutes)", "a 64 KB bucket", "a 30 s timeout".
_SETTING_BEFORE = re.compile(
    r"(?:\b(?:sets?|setting|defaults?|timeout|interval|limit)\b(?:\s+\S+){0,2}|\bevery)"
    r"\s*(?:about\s+)?[(~≈]?$",
    re.IGNORECASE,
)
_SETTING_AFTER = re.compile(
    r"\s*(?:bucket|buffer|timeout|limit|cap|budget|chunk|page|block|window|interval|cache)s?\b",
    re.IGNORECASE,
)
# The rest of a question after a number: "Would 16 GB be enough?", "*\"Why 112 GB?\"*".
_QUESTION_REST = re.compile(r"[^.!;?]*\?")


def is_setting(text: str, quoted: numbers.Quoted) -> bool:
    """A configured value or a data-type size, which no measurement record backs.

    Zero needs no source; sizes in plain bytes below 1 KiB are data-type and toy sizes
    ("fp16 uses 2 bytes per parameter", "4 params × 12 bytes"), never a measured footprint.
    """
    if quoted.value == 0 or (quoted.unit.lower() in ("byte", "bytes") and quoted.value < 1024):
        return True  # "saves 0 GB" states an absence; small byte counts are data types
    return bool(
        _SETTING_AFTER.match(text, quoted.end)
        or _SETTING_BEFORE.search(text, max(0, quoted.start - 40), quoted.start)
    )


def shows_calculation(text: str) -> bool:
    """Whether a line shows a calculation (so its numbers are derived, not quoted)."""
    if _OPERATION.search(text):
        return True
    equals = list(_EQUALS.finditer(text))
    return bool(equals) and bool(_LEFT_NUMBER.search(text, 0, equals[-1].start()))


def is_device_spec(text: str, quoted: numbers.Quoted) -> bool:
    """ "40 GB GPUs", "24GB VRAM", "A100-80GB": a device's size, a specification, not a result."""
    return bool(
        _DEVICE_SIZE.match(text, quoted.end)
        or _DEVICE_BEFORE.search(text, max(0, quoted.start - 24), quoted.start)
    )


@dataclass
class Problem:
    entry: str
    kind: str
    detail: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckReport:
    ok: bool
    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "problems": [p.to_dict() for p in self.problems],
        }


class Records:
    """Measurement records by id, loaded once per check (``profiling.records``)."""

    def __init__(self, root: Path) -> None:
        from profiling.records import RecordStore

        self.store = RecordStore(measurements_dir(root))
        self._cache: dict[str, Any] = {}

    def values(self, record_id: str) -> list[tuple[str, float, str]] | str:
        """``[(name, value, unit)]`` of the record's results and steps, or why it is unusable."""
        if record_id not in self._cache:
            try:
                record = self.store.load(record_id)
                self._cache[record_id] = [(q.name, q.value, q.unit) for q in record.results] + [
                    (s.name, s.value, s.unit) for s in record.steps
                ]
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
        self.records = Records(self.root)
        # A draft has no recorded hashes (and may share a derived id with an old entry).
        self.hashes = (
            RefStore(state_dir(self.root) / "refs.jsonl").load() if recorded_hashes else {}
        )

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
        problems = []
        recorded = self.hashes.get(entry.id, {})
        for ref in entry.refs:
            why = resolve_problem(ref, self.files)
            if why is not None:
                problems.append(Problem(entry.id, "missing_ref", why, ref.line))
                continue
            old = recorded.get(ref.key)
            if old is not None and old != content_hash(ref, self.files):
                lines = (
                    f"line {ref.start}" if ref.start == ref.end else f"lines {ref.start}-{ref.end}"
                )
                problems.append(
                    Problem(
                        entry.id,
                        "stale_ref",
                        f"{ref.path} {lines} changed since the entry was written "
                        f"(reference {ref.key}); re-read the code, update the entry, then run "
                        f"`journal-agent journal refresh {entry.id}`",
                        ref.line,
                    )
                )
        return problems

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
            for start, end, ids in _spans(line, cits):
                values = self._values(ids)
                if not values:
                    continue
                for quoted in _checked_quantities(_blank_citations(line), start, end):
                    if any(numbers.matches(quoted, v, u) for _, v, u in values):
                        continue
                    problems.append(
                        Problem(
                            entry.id,
                            "bad_citation",
                            f"{quoted.text} beside {', '.join(map(cite, ids))} is "
                            f"not a value of the cited record{'s' if len(ids) > 1 else ''}"
                            f"{_closest(quoted, values)}",
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
        cited_blocks = _cited_blocks(entry)
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
            if i not in cited_blocks:
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
            ids, is_table, first = cited_blocks[i]
            values = self._values(ids)
            if not values:
                continue
            own = [c for c in entry.citations if c.line == lineno]
            checked = [(a, b) for a, b, _ in _spans(bare(raw), own)] if own else []
            wrong = [
                q
                for q in found
                if not any(a <= q.start < b for a, b in checked)
                and not any(numbers.matches(q, v, u) for _, v, u in values)
                and not (is_table and _is_column_total(entry, first, i, line, q))
            ]
            if not wrong:
                continue
            cited = ", ".join(map(cite, ids))
            shown = ", ".join(f"'{q.text}'" for q in wrong[:4])
            if is_table:
                closest = _closest(wrong[0], values)
                kind = "bad_citation"
                detail = (
                    f"{shown} in a table citing {cited} is not a value of the cited "
                    f"record{'s' if len(ids) > 1 else ''}{closest}; fix the number, cite its "
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


def _cited_blocks(entry: Entry) -> dict[int, tuple[list[str], bool, int]]:
    """Lines of paragraphs, list items and tables that contain a citation (outside code):
    line index -> (the record ids cited there, whether the block is a table, its first line)."""
    if not entry.citations:
        return {}
    blocks: list[list[int]] = []
    current: list[int] = []
    kind = ""
    for i in range(1, len(entry.lines)):
        text = bare(entry.lines[i])
        if entry.fences[i] or not text.strip():
            if current:
                blocks.append(current)
            current, kind = [], ""
            continue
        line_kind = "table" if text.lstrip().startswith("|") else "text"
        starts_new = _LIST_ITEM.match(text) or text.lstrip().startswith("#") or line_kind != kind
        if starts_new and current:
            blocks.append(current)
            current = []
        current.append(i)
        kind = line_kind
    if current:
        blocks.append(current)
    cited: dict[int, tuple[list[str], bool, int]] = {}
    caption: list[str] = []
    for block in blocks:
        ids = [
            m.group(0)[3:-1]
            for i in block
            if "[m:" in entry.lines[i]
            for m in CITATION.finditer(entry.lines[i])
            if len(m.group(0)) > 4
        ]
        is_table = bare(entry.lines[block[0]]).lstrip().startswith("|")
        # A caption ("Peak memory per configuration [m:x]:") covers the table below it.
        if is_table and caption:
            ids = list(dict.fromkeys(caption + ids))
        if ids:
            cited.update((i, (ids, is_table, block[0])) for i in block)
        has_own = any("[m:" in entry.lines[i] and CITATION.search(entry.lines[i]) for i in block)
        caption = ids if has_own and bare(entry.lines[block[-1]]).rstrip().endswith(":") else []
    return cited


def _is_column_total(entry: Entry, first: int, row: int, line: str, quoted: numbers.Quoted) -> bool:
    """Whether a table cell is the sum of the quantities above it in its column (a "Total"
    row: derived from cited rows, not quoted)."""
    scale = numbers.unit_scale(quoted.unit)
    if scale is None:
        return False
    column = line.count("|", 0, quoted.start)
    total, terms = 0.0, 0
    for i in range(first, row):
        cells = bare(entry.lines[i]).split("|")
        for cell in numbers.find_quantities(cells[column]) if column < len(cells) else []:
            other = numbers.unit_scale(cell.unit)
            if other is None or other[0] != scale[0]:
                return False
            total += cell.value * other[1]
            terms += 1
    value = quoted.value * scale[1]
    tolerance = max(0.5 * 10.0 ** (-quoted.decimals) * scale[1], 0.01 * value)
    return terms >= 2 and abs(total - value) <= tolerance


def _blank_citations(line: str) -> str:
    """The line with each ``[m:<id>]`` blanked out (same length: columns are kept)."""
    return CITATION.sub(lambda m: " " * len(m.group(0)), line)


def _spans(line: str, cits: list[Citation]) -> list[tuple[int, int, list[str]]]:
    """The columns checked against each citation: the table row, else its sentence (or the
    sentence before, when the citation closes it: ``Peak was 71.7 GiB. [m:x]``)."""
    ids = [c.record_id for c in cits if c.record_id]
    if line.lstrip().startswith("|"):
        return [(0, len(line), ids)] if ids else []
    blank = _blank_citations(line)
    bounds = [0] + [m.end() for m in _SENTENCE_END.finditer(line)] + [len(line)]
    sentences = [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]
    out: dict[int, list[str]] = {}
    for cit in cits:
        if not cit.record_id:
            continue
        last = len(sentences) - 1
        k = next((n for n, (a, b) in enumerate(sentences) if a <= cit.start < b), last)
        if not numbers.find_quantities(blank[sentences[k][0] : sentences[k][1]]) and k > 0:
            k -= 1
        out.setdefault(k, []).append(cit.record_id)
    return [(sentences[k][0], sentences[k][1], rids) for k, rids in out.items()]


def _checked_quantities(line: str, start: int, end: int) -> list[numbers.Quoted]:
    """Quantities of ``line[start:end]`` that must be values of the cited record.

    A device's size and a setting are specifications. In a calculation (``3 × 13.48 GB =
    40.44 GB``) only the results after the last ``=`` or ``≈`` are quoted, and a result the
    calculation shown on its left gives is derived, not quoted. In a table row each cell is
    judged alone, and a cell that shows a calculation without a result (a "Calculation"
    column: ``6.74B × 2 bytes``) quotes nothing.
    """
    span = line[start:end]
    segments = span.split("|") if span.lstrip().startswith("|") else [span]
    out = []
    for text in segments:
        equals = list(_EQUALS.finditer(text))
        if not equals and len(segments) > 1 and shows_calculation(text):
            continue
        cut = equals[-1].end() if equals else 0
        for quoted in numbers.find_quantities(text):
            if quoted.start < cut or is_device_spec(text, quoted) or is_setting(text, quoted):
                continue
            if equals and numbers.calculation_matches(text[: equals[-1].start()], quoted):
                continue
            out.append(quoted)
    return out


def _closest(quoted: numbers.Quoted, values: list[tuple[str, float, str]]) -> str:
    best = None
    for name, value, unit in values:
        q = numbers.unit_scale(quoted.unit)
        r = numbers.unit_scale(unit)
        if not (q and r and q[0] == r[0]):
            continue
        distance = abs(value * r[1] / q[1] - quoted.value)
        if best is None or distance < best[0]:
            best = (distance, name, numbers.describe(value, unit, quoted))
    if best is None:
        return " (it has no value in that unit)"
    if best[0] > 0.25 * abs(quoted.value):  # a far "closest" would invite a wrong fix
        return " (none of its values is within 25% of it)"
    return f" (closest: {best[1]} = {best[2]})"


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
    path = Path(root) / JOURNAL_FILE
    if not path.is_file():
        return CheckReport(ok=True)
    data = path.read_bytes()
    issues = scan(data)
    text = data.decode("utf-8", errors="replace")
    journal = parse_journal(text)
    checker = Checker(root)
    problems: list[Problem] = []
    entry_problems: dict[str, int] = {}
    for issue in issues:
        owner = _owner(journal, issue.line)
        problems.append(Problem(owner, "encoding", issue.detail, issue.line))
    for entry in journal.entries:
        problems += checker.check_entry(entry)
    for p in problems:
        entry_problems[p.entry] = entry_problems.get(p.entry, 0) + 1
    entries = [{**e.summary(), "problems": entry_problems.get(e.id, 0)} for e in journal.entries]
    problems.sort(key=lambda p: (p.line or 0, p.kind))
    return CheckReport(ok=not problems, entries=entries, problems=problems)


def _owner(journal: Journal, line: int) -> str:
    owner = "(preamble)"
    for entry in journal.entries:
        if entry.start_line <= line:
            owner = entry.id
        else:
            break
    return owner


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


def ref_hashes(root: Path, entry: Entry) -> dict[str, str]:
    """Content hashes of the lines an entry references (those that resolve)."""
    files = FileCache(Path(root))
    out = {}
    for ref in entry.refs:
        digest = content_hash(ref, files)
        if digest is not None and resolve_problem(ref, files) is None:
            out[ref.key] = digest
    return out
