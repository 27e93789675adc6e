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


@dataclass(frozen=True)
class Quoted:
    text: str
    value: float
    decimals: int
    unit: str
    start: int
    end: int


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
        found.append(Quoted(m.group(0), value, len(frac), unit, m.start(), m.end()))
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
    return abs(converted - quoted.value) <= tolerance * (1 + 1e-9) + 1e-12 * abs(converted)


def describe(value: float, unit: str, like: Quoted) -> str:
    """A record value shown in the quote's unit, for messages ("closest: 71.71 GiB")."""
    q = unit_scale(like.unit)
    r = unit_scale(unit)
    if q and r and q[0] == r[0]:
        return f"{value * r[1] / q[1]:.{max(like.decimals, 2)}f} {like.unit}"
    return f"{value:g} {unit}"
