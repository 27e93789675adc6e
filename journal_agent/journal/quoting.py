"""What a citation vouches for: the numbers beside it and in its block, and the numbers that
are not quoted at all (specifications, settings, calculations shown). Used by ``journal check``
(:mod:`journal_agent.journal.verify`) and the ledger's check."""

from __future__ import annotations

import re

from journal_agent.journal import numbers
from journal_agent.journal._text import bare
from journal_agent.journal.model import Citation, Entry
from profiling.citations import CITATION

# A calculation is an operator between two numeric operands ("7B × 2 bytes", "56 GB / 2",
# "(28 GB) + (28 GB)"); "4× larger" or "→ IMPOSSIBLE" are not calculations.
_OPERATION = re.compile(
    r"(?:(?<![\w.])\d[\w.%]*|\))(?:\s?[A-Za-zµμ]+\)?)?\s*(?:[*/+×÷·⋅]|\sx\s|\s[-−–]\s)\s*[\d(]"
)
# ... or an "=" / "≈" with a number on its left ("Total = 14 + 56 = 70 GB"), where a number
# inside a name ("Llama-2-7B", "fp16", "A100") does not count: "Optimizer = 56 GB" shows nothing.
EQUALS = re.compile(r"[=≈]")
_LEFT_NUMBER = re.compile(r"(?<![\w.-])\d")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"[.!?;](?=\s)")
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
    equals = list(EQUALS.finditer(text))
    return bool(equals) and bool(_LEFT_NUMBER.search(text, 0, equals[-1].start()))


def is_device_spec(text: str, quoted: numbers.Quoted) -> bool:
    """ "40 GB GPUs", "24GB VRAM", "A100-80GB": a device's size, a specification, not a result."""
    return bool(
        _DEVICE_SIZE.match(text, quoted.end)
        or _DEVICE_BEFORE.search(text, max(0, quoted.start - 24), quoted.start)
    )


def cited_blocks(entry: Entry) -> dict[int, tuple[list[str], bool, int]]:
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


def is_column_total(entry: Entry, first: int, row: int, line: str, quoted: numbers.Quoted) -> bool:
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


def blank_citations(line: str) -> str:
    """The line with each ``[m:<id>]`` blanked out (same length: columns are kept)."""
    return CITATION.sub(lambda m: " " * len(m.group(0)), line)


def cited_spans(line: str, cits: list[Citation]) -> list[tuple[int, int, list[str]]]:
    """The columns checked against each citation: the table row, else its sentence (or the
    sentence before, when the citation closes it: ``Peak was 71.7 GiB. [m:x]``)."""
    ids = [c.record_id for c in cits if c.record_id]
    if line.lstrip().startswith("|"):
        return [(0, len(line), ids)] if ids else []
    blank = blank_citations(line)
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


def checked_quantities(line: str, start: int, end: int) -> list[numbers.Quoted]:
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
        equals = list(EQUALS.finditer(text))
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


def closest(quoted: numbers.Quoted, values: list[tuple[str, float, str]]) -> str:
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
