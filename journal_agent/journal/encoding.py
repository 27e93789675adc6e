"""Encoding trouble: invalid UTF-8 and double-encoded text (mojibake), found and repaired.

Double encoding happens when UTF-8 bytes are read through a legacy 8-bit code page (cp1252 or
latin-1) and saved again as UTF-8: ``🔍`` becomes ``ðŸ”``, ``─`` becomes ``â”€``, ``机制``
becomes ``æœºåˆ¶``. We map such characters back to their bytes and decode them as UTF-8.
cp1252 leaves five bytes (0x81 0x8D 0x8F 0x90 0x9D) undefined, so a converter may have dropped
them; we restore a dropped byte only when exactly one choice gives a character the user's
format uses (a section emoji, an indicator, a box-drawing character), and otherwise report the
line as not repairable.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from dataclasses import dataclass, field

from journal_agent.journal.sections import SECTIONS, identify

_UNDEFINED_CP1252 = (0x81, 0x8D, 0x8F, 0x90, 0x9D)


def _byte_table() -> dict[str, int]:
    table: dict[str, int] = {}
    for b in range(0x80, 0x100):
        table[chr(b)] = b  # latin-1 reading (also keeps the C1 controls cp1252 leaves undefined)
        with contextlib.suppress(UnicodeDecodeError):
            table[bytes([b]).decode("cp1252")] = b
    return table


_TO_BYTE = _byte_table()
_CONT_CHARS = "".join(sorted(c for c, b in _TO_BYTE.items() if 0x80 <= b <= 0xBF))
_LEAD_CHARS = "".join(sorted(c for c, b in _TO_BYTE.items() if 0xC2 <= b <= 0xF4))
_RUN = re.compile(f"[{re.escape(_LEAD_CHARS)}][{re.escape(_CONT_CHARS)}]{{1,3}}[?\ufffd]?")

KNOWN_CHARS = frozenset(
    "".join(s.emoji for s in SECTIONS)
    + "✅❌⚠💥🔥→←↑↓↔⇒─━│┃┌┐└┘├┤┬┴┼═║╔╗╚╝≈≤≥×÷√∑∇∂μ…–—“”‘’•·°±²³é"
    + "🎓📚📌📈📉🧠🚧✨⭐🟢🟡🔴"
    + "₀₁₂₃₄₅₆₇₈₉⏸⏱⏳"  # β₁ in Adam's formulas, status marks (each loses a byte: ₁, ⏸ ⏱ ⏳)
    + "\ufe0f"  # the variation selector after 🏷 and ⚠ (its last byte, 0x8F, is one cp1252 drops)
)


def _expected_length(lead: int) -> int:
    return 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _fix_run(run: str, line: str = "") -> tuple[str, bool] | None:
    """``(original text, guessed)`` for one mojibake run, or None when it cannot be told.

    ``line`` (the run's line) breaks ties between characters the format uses: the emoji of
    the section a heading names (``### ðŸ“ Analogy`` is 📝, ``### ðŸ“ Diagrams`` is 📐).
    """
    lost_marker = run[-1] in "?\ufffd"
    chars = run[:-1] if lost_marker else run
    raw = bytes(_TO_BYTE[c] for c in chars)
    need = _expected_length(raw[0])
    if len(raw) >= need:
        try:
            fixed = raw[:need].decode("utf-8")
        except UnicodeDecodeError:
            return None
        rest = chars[need:] + (run[-1] if lost_marker else "")
        return fixed + rest, False
    missing = need - len(raw)
    if missing not in (1, 2):
        return None
    candidates = set()
    for slots in itertools.combinations(range(1, need), missing):
        for lost in itertools.product(_UNDEFINED_CP1252, repeat=missing):
            trial = bytearray(raw)
            for slot, byte in zip(slots, lost, strict=True):
                trial.insert(slot, byte)
            try:
                candidates.add(bytes(trial).decode("utf-8"))
            except UnicodeDecodeError:
                continue
    known = [c for c in candidates if c in KNOWN_CHARS or c.rstrip("\ufe0f") in KNOWN_CHARS]
    if len(known) > 1 and line:
        known = _by_context(known, run, line) or known
    if len(known) > 1:
        # Box drawing: ┐ (E2 94 90) loses its last byte; of the five fits it is the only one
        # from the light single-line set that ASCII-art diagrams use (the others are ━ ┍ ┏ ┝).
        light = [c for c in known if c in _LIGHT_BOX]
        known = light if len(light) == 1 and all(c in _BOX for c in known) else known
    return (known[0], True) if len(known) == 1 else None


_BOX = frozenset(chr(c) for c in range(0x2500, 0x2580))
_LIGHT_BOX = frozenset("─│┌┐└┘├┤┬┴┼")


def _by_context(known: list[str], run: str, line: str) -> list[str]:
    """The candidates that are the emoji of the section the rest of the line names."""
    label = line.replace(run, " ", 1).strip().lstrip("#").strip()
    spec = identify(label)
    if spec is None or not spec.emoji:
        return []
    return [c for c in known if c.rstrip("\ufe0f") == spec.emoji.rstrip("\ufe0f")]


@dataclass
class EncodingIssue:
    line: int
    kind: str  # "invalid_utf8" | "mojibake"
    detail: str


def _looks_like_mojibake(match: re.Match[str]) -> bool:
    run = match.group(0)
    chars = run[:-1] if run[-1] in "?\ufffd" else run
    raw = bytes(_TO_BYTE[c] for c in chars)
    need = _expected_length(raw[0])
    if len(raw) >= need:
        try:
            raw[:need].decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False
    # A shortened run (bytes were lost) still counts when lost bytes could complete it: one
    # byte of a 3- or 4-byte character, or two of an emoji (which all start F0 9F).
    missing = need - len(raw)
    if missing == 1 and len(chars) == 2 and chars[1] in _TYPOGRAPHIC and not _amid(match):
        # "café”", "résumé’s", "café…": a letter before closing punctuation is ordinary
        # text; it counts only amid other damage ("åˆ†é…ä¸Ž" is 分配与 with 0x8D lost) or when
        # a lost byte would complete a character the format uses ("â”" is ┐ with 0x90 lost).
        return _fix_run(run) is not None
    return (missing == 1 and need >= 3) or (missing == 2 and raw[:2] == b"\xf0\x9f")


def _amid(match: re.Match[str]) -> bool:
    """Whether a run touches other double-encoded or CJK text."""
    text, start, end = match.string, match.start(), match.end()
    around = (text[start - 1] if start else "") + (text[end] if end < len(text) else "")
    return any(c in _TO_BYTE or ord(c) >= 0x2E80 for c in around)


_TYPOGRAPHIC = frozenset("”’“‘„‚…–—»›«‹™°²³¹·\xa0")


def find_mojibake(line_text: str) -> list[re.Match[str]]:
    return [m for m in _RUN.finditer(line_text) if _looks_like_mojibake(m)]


def scan(data: bytes, first_line: int = 1) -> list[EncodingIssue]:
    """Every line that is not valid UTF-8 or holds double-encoded text (1-based lines, the
    first being ``first_line``: a part of a file, cut at a line's start, is scanned alike)."""
    try:  # the common case: one pass over the text
        return scan_text(data.decode("utf-8"), first_line=first_line)
    except UnicodeDecodeError:
        pass
    issues: list[EncodingIssue] = []
    for n, raw in enumerate(data.split(b"\n"), start=first_line):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.append(
                EncodingIssue(
                    n,
                    "invalid_utf8",
                    f"line {n}: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} "
                    "is not valid UTF-8",
                )
            )
            continue
        runs = find_mojibake(text)
        if runs:
            sample = ", ".join(repr(m.group(0)) for m in runs[:3])
            issues.append(
                EncodingIssue(
                    n,
                    "mojibake",
                    f"line {n}: double-encoded text {sample} (UTF-8 read as cp1252/latin-1)",
                )
            )
    return issues


def scan_text(text: str, first_line: int = 1) -> list[EncodingIssue]:
    """Mojibake in decoded text, one issue per line (1-based from ``first_line``)."""
    by_line: dict[int, list[str]] = {}
    line, counted_to = first_line, 0
    for match in _RUN.finditer(text):
        if not _looks_like_mojibake(match):
            continue
        line += text.count("\n", counted_to, match.start())
        counted_to = match.start()
        by_line.setdefault(line, []).append(match.group(0))
    return [
        EncodingIssue(
            n,
            "mojibake",
            f"line {n}: double-encoded text {', '.join(repr(r) for r in runs[:3])} "
            "(UTF-8 read as cp1252/latin-1)",
        )
        for n, runs in by_line.items()
    ]


@dataclass
class RepairResult:
    data: bytes
    fixed_lines: list[int] = field(default_factory=list)
    unrepaired_lines: list[int] = field(default_factory=list)
    guessed_lines: list[int] = field(default_factory=list)  # a lost byte was restored

    @property
    def changed(self) -> bool:
        return bool(self.fixed_lines)


def repair(data: bytes) -> RepairResult:
    """Best-effort repair; lines that stay broken are listed in ``unrepaired_lines``."""
    result = RepairResult(b"")
    out: list[bytes] = []
    for n, raw in enumerate(data.split(b"\n"), start=1):
        changed = False
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # A line saved in a legacy code page: read it the way it was written.
            text = "".join(chr(b) if b < 0x80 else _cp1252_char(b) for b in raw)
            changed = True
        broken = guessed = False
        if find_mojibake(text):
            pieces: list[str] = []
            pos = 0
            for match in find_mojibake(text):
                fixed = _fix_run(match.group(0), text)
                pieces.append(text[pos : match.start()])
                if fixed is None:
                    broken = True
                    pieces.append(match.group(0))
                else:
                    changed = True
                    guessed = guessed or fixed[1]
                    pieces.append(fixed[0])
                pos = match.end()
            pieces.append(text[pos:])
            text = "".join(pieces)
        if changed:
            result.fixed_lines.append(n)
        if broken:
            result.unrepaired_lines.append(n)
        if guessed:
            result.guessed_lines.append(n)
        out.append(text.encode("utf-8"))
    result.data = b"\n".join(out)
    return result


def _cp1252_char(b: int) -> str:
    try:
        return bytes([b]).decode("cp1252")
    except UnicodeDecodeError:
        return chr(b)
