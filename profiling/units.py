"""Units: byte and count formatting and parsing, shared by the estimate, the trace, the reports,
the plots and journal-agent's CLI and tools (public: ``from profiling.units import fmt_bytes``)."""

from __future__ import annotations

import re

from profiling.errors import ProfilingError

GB = 10**9
GiB = 2**30

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str | float | int) -> int:
    """'7e9', '7B', '1.1b', '124M', 6738415616 -> a parameter count."""
    if isinstance(text, int | float):
        return int(text)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if not match:
        raise ProfilingError(f"cannot read {text!r} as a count; write e.g. 7e9, 7B or 124M")
    return round(float(match.group(1)) * _SUFFIX[match.group(2)])


def fmt_bytes(n: float, unit: str = "auto") -> str:
    """Decimal units by default (the way GPU sizes are quoted): 14.00 GB, 512.0 MB. ``unit``
    "GB" keeps a column in GB, but a size under 0.01 GB drops to MB or KB: "0.00 GB" says
    nothing (a step counter's 1.2 KB, a --gpu-mem of 0.001); "GiB" likewise drops to MiB or
    KiB."""
    if unit == "GiB":  # binary beside a decimal figure; a toy's under 0.01 GiB in MiB or KiB
        if n == 0 or abs(n) >= GiB / 100:
            return f"{n / GiB:,.2f} GiB"
        return f"{n / 2**20:,.1f} MiB" if abs(n) >= 2**20 else f"{n / 2**10:,.1f} KiB"
    if (unit == "GB" and (n == 0 or abs(n) >= GB / 100)) or (unit == "auto" and abs(n) >= GB):
        return f"{n / GB:,.2f} GB"
    if abs(n) >= 10**6:
        return f"{n / 10**6:,.1f} MB"
    if abs(n) >= 10**3:
        return f"{n / 10**3:,.1f} KB"
    return f"{n:,.0f} B"


def fmt_count(n: float) -> str:
    """6738415616 -> '6.74B' (parameters, elements, FLOPs): three significant digits and a
    magnitude letter, never an exponent ('1.86P', not '1.86e+03T'; 999,700 is '1M')."""
    sizes = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))
    for i, (size, suffix) in enumerate(sizes):
        if abs(n) < size:
            continue
        value = float(f"{n / size:.3g}")
        if abs(value) >= 1000 and i > 0:  # 999.7K rounds to 1000K: say 1M
            size, suffix = sizes[i - 1]
            value = float(f"{n / size:.3g}")
        if abs(value) >= 1000:  # beyond the largest letter: digits with commas
            return f"{value:,.0f}{suffix}"
        return f"{value:g}{suffix}"
    return f"{n:,.6g}" if abs(n) < 1e3 else f"{n:,.0f}"
