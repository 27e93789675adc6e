"""Numbers with memory or time units: finding them in text and matching them to records.

Matching is unit-aware (GiB/GB/MiB/MB/KiB/KB/bytes, ns/µs/ms/s/min/h) and rounding-tolerant:
a quoted ``71.7 GiB`` matches a record value when that value, converted to GiB, is within half
a unit of the last written digit (71.65 ≤ v ≤ 71.75).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MEMORY = {
    "b": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "kb": 1e3,
    "kib": 2.0**10,
    "mb": 1e6,
    "mib": 2.0**20,
    "gb": 1e9,
    "gib": 2.0**30,
    "tb": 1e12,
    "tib": 2.0**40,
}
_TIME = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}

# In prose a bare "B" is usually a parameter count ("7B"), so text units exclude it; records
# may use "B" for bytes.
_TEXT_UNITS = (
    r"KiB|MiB|GiB|TiB|KB|kB|MB|GB|TB|bytes|byte|ns|µs|μs|us|ms|seconds|second|secs|sec"
    r"|minutes|minute|mins|min|hours|hour|hrs|hr|s|h"
)
_QUANTITY = re.compile(
    r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?"
    r"(?P<space>\s?)(?P<unit>" + _TEXT_UNITS + r")(?![\w/])"
)


_APPROX = re.compile(
    r"(?:~|≈|\b(?:about|around|roughly|nearly|almost|approx\.?|approximately))\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quoted:
    text: str
    value: float
    decimals: int
    unit: str
    start: int
    end: int
    approx: bool = False  # "~90 GB", "about 90 GB": trailing zeros are not significant


def unit_scale(unit: str) -> tuple[str, float] | None:
    """(dimension, factor to the base unit) for a known unit, else None."""
    u = unit.strip()
    key = u.lower() if u not in ("B",) else "b"
    if key in _MEMORY:
        return "memory", _MEMORY[key]
    if u in _TIME or key in _TIME:
        return "time", _TIME.get(u, _TIME.get(key, 1.0))
    return None


def find_quantities(text: str) -> list[Quoted]:
    """Numbers followed by a memory or time unit.

    Single-letter units (``s``, ``h``) count only with a space or a decimal point (``0.5s``,
    ``3 s``), so that ``1990s`` or ``2h``-style shorthands in prose are not taken for times.
    """
    found: list[Quoted] = []
    for m in _QUANTITY.finditer(text):
        unit = m.group("unit")
        if unit in ("s", "h") and not (m.group("space") or m.group("frac")):
            continue
        frac = m.group("frac") or ""
        value = float(m.group("num").replace(",", "") + ("." + frac if frac else ""))
        approx = bool(_APPROX.search(text, max(0, m.start() - 16), m.start()))
        found.append(Quoted(m.group(0), value, len(frac), unit, m.start(), m.end(), approx))
    return found


def matches(quoted: Quoted, value: float, unit: str) -> bool:
    """Whether ``value unit`` (from a record), written with the quote's precision, is the quote."""
    q = unit_scale(quoted.unit)
    r = unit_scale(unit)
    if q is None or r is None:
        if quoted.unit.lower() != unit.strip().lower():
            return False
        converted = value
    else:
        if q[0] != r[0]:
            return False
        converted = value * r[1] / q[1]
    tolerance = 0.5 * 10.0 ** (-quoted.decimals)
    if quoted.approx and not quoted.decimals and quoted.value >= 10:
        digits = str(int(quoted.value))
        tolerance = 0.5 * 10.0 ** (len(digits) - len(digits.rstrip("0")))
    return abs(converted - quoted.value) <= tolerance * (1 + 1e-9) + 1e-12 * abs(converted)


def describe(value: float, unit: str, like: Quoted) -> str:
    """A record value shown in the quote's unit, for messages ("closest: 71.71 GiB")."""
    q = unit_scale(like.unit)
    r = unit_scale(unit)
    if q and r and q[0] == r[0]:
        return f"{value * r[1] / q[1]:.{max(like.decimals, 2)}f} {like.unit}"
    return f"{value:g} {unit}"


# -- calculations shown in the text --------------------------------------------------------

# An operand: a number with a magnitude suffix ("6.74B" parameters, "124M") or a unit
# ("2 B" or "2 bytes" per parameter, "13.48 GB"); a bare "B" after a space is bytes.
_OPERAND = re.compile(
    r"(?P<num>\d+(?:\.\d+)?)(?:(?P<mag>[KkMBGTP])(?![A-Za-z])|\s?(?P<unit>"
    + _TEXT_UNITS
    + r"|B)(?![\w/]))?"
)
_TIMES_X = re.compile(r"x(?![A-Za-z])")
_LABEL_WORD = re.compile(r"[A-Za-z][A-Za-z_-]*")
_MAGNITUDE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_OPERATORS = {
    "×": "*",
    "*": "*",
    "·": "*",
    "⋅": "*",
    "x": "*",
    "/": "/",
    "÷": "/",
    "+": "+",
    "-": "-",
    "−": "-",
    "–": "-",
    "(": "(",
    ")": ")",
}


def _evaluate(expr: str) -> tuple[float, set[str]] | None:
    """An arithmetic expression over quantities in base units (bytes, seconds), or None.

    The dimensions it uses come back with it; ``"scaled"`` marks a magnitude suffix (``7B``).
    """
    out: list[str] = []
    dims: set[str] = set()
    pos, expect_operand = 0, True
    while pos < len(expr):
        char = expr[pos]
        if char.isspace():
            pos += 1
            continue
        match = _OPERAND.match(expr, pos) if expect_operand else None
        if match:
            value = float(match.group("num"))
            if match.group("mag"):
                value *= _MAGNITUDE[match.group("mag")]
                dims.add("scaled")
            elif match.group("unit"):
                scale = unit_scale(match.group("unit"))
                if scale is None:
                    return None
                dims.add(scale[0])
                value *= scale[1]
            out.append(repr(value))
            pos, expect_operand = match.end(), False
        elif char in _OPERATORS and (char != "x" or _TIMES_X.match(expr, pos)):
            out.append(_OPERATORS[char])
            expect_operand = char != ")"
            pos += 1
        elif word := _LABEL_WORD.match(expr, pos):
            pos = word.end()  # "7B params × 2 bytes", "seq 2048 × batch 1": labels, not math
        else:
            return None
    if not out or expect_operand:
        return None
    try:
        value = eval("".join(out), {"__builtins__": {}}, {})  # only numbers and + - * / ( )
    except (SyntaxError, ZeroDivisionError, TypeError, ValueError):
        return None
    return float(value), dims


def calculation_gives(left: str, quoted: Quoted) -> float | None:
    """What the calculation written just before ``= <quoted>`` gives, in the quoted unit.

    ``left`` is the text before the ``=``; the calculation is its longest tail that is pure
    arithmetic over numbers and quantities (``3 × 13.48 GB``, ``6.74B × 2 bytes``). None when
    there is no such tail, or it mixes in another dimension than the quote's.
    """
    scale = unit_scale(quoted.unit)
    if scale is None:
        return None
    left = _LABEL.sub("", left)  # "momentum (28 GB) + variance (28 GB)": labels are not math
    starts = [m.start() for m in re.finditer(r"(?<![\w.])[\d(]", left)]
    for start in starts:
        result = _evaluate(left[start:])
        if result is None:
            continue
        value, dims = result
        if dims - {scale[0], "scaled"}:
            return None
        # Plain numbers ("14 + 56 + 14 + 15 = 99 GB") are in the result's unit.
        return value if not dims else value / scale[1]
    return None


_LABEL = re.compile(r"(?<![\w.])[A-Za-z][\w-]*\s*(?=\()")


def calculation_matches(left: str, quoted: Quoted) -> bool:
    """Whether the shown calculation gives the quoted result (rounding-tolerant, 1% slack for
    rounded operands)."""
    value = calculation_gives(left, quoted)
    if value is None:
        return False
    tolerance = max(0.5 * 10.0 ** (-quoted.decimals), 0.01 * abs(quoted.value))
    return abs(value - quoted.value) <= tolerance
