"""Small SVG charts drawn on the server (no JavaScript, no CDN): horizontal bars for a
breakdown, and memory over a run with the peak marked. Every label is escaped."""

from __future__ import annotations

import math

from markupsafe import Markup, escape

from profiling.units import fmt_bytes

_W = 720
_CHAR = 6.3  # the width of one character of an 11 px label, about
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def bars(items: list[tuple[str, float]], title: str, limit: float | None = None) -> Markup:
    """One bar per (label, bytes), each with its size written beside it: largest first, or
    with a ``limit`` (the memory a fit may use) in the order given, the limit drawn across."""
    items = [i for i in items if i[1] > 0]
    if limit is None:
        items.sort(key=lambda i: -i[1])
    if not items:
        return Markup("")
    top = max([v for _, v in items] + [limit or 0])
    # The label column as wide as the longest label needs (up to half the chart), so that
    # "Optimizer: fp32 master weights" is read whole, not cut.
    longest = max(len(label) for label, _ in items)
    row, right = 26, 110
    left = min(_W // 2, max(120, int(_CHAR * longest) + 16))
    room = max(8, int((left - 16) / _CHAR))
    height = 34 + row * len(items) + (18 if limit is not None else 0)
    parts = [_open(height, title)]
    for n, (label, value) in enumerate(items):
        y = 30 + n * row
        width = max(1.0, (_W - left - right) * value / top)
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" class="lbl">'
            f"{escape(_short(label, room))}</text>"
            f'<rect x="{left}" y="{y + 3}" width="{width:.1f}" height="{row - 8}" '
            f'fill="{_PALETTE[n % len(_PALETTE)]}"><title>{escape(label)}: '
            f"{escape(fmt_bytes(value))}</title></rect>"
            f'<text x="{left + width + 6:.1f}" y="{y + 15}" class="val">'
            f"{escape(fmt_bytes(value))}</text>"
        )
    if limit is not None:
        x, bottom = left + (_W - left - right) * limit / top, 30 + row * len(items)
        parts.append(
            f'<line x1="{x:.1f}" y1="26" x2="{x:.1f}" y2="{bottom}" class="limit"/>'
            f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" class="limitlbl">'
            f"usable {escape(fmt_bytes(limit))}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def timeline(
    points: list[tuple[str, float, float | None]],
    title: str,
    *,
    limit: tuple[str, float] | None = None,
    legend: str = "line: held at the end of each point; dots: the peak within it",
) -> Markup:
    """Memory at each point of a run: (label, bytes held, peak within it or None); the highest
    peak is marked, its value written right above its marker; ``limit`` (its label and bytes:
    the GPU's memory) is drawn across."""
    if not points:
        return Markup("")
    highest = max(max(held, peak or 0) for _, held, peak in points)
    ticks = nice_ticks(max(highest, limit[1] if limit else 0) * 1.12)
    top = ticks[-1] or 1
    left, bottom, height = 90, 60, 300
    inner_w, inner_h = _W - left - 60, height - bottom - 30
    step = inner_w / max(1, len(points) - 1) if len(points) > 1 else 0

    def xy(i: int, value: float) -> tuple[float, float]:
        return left + i * step, 30 + inner_h * (1 - value / top)

    parts = [_open(height, title), _axis(left, inner_w, inner_h, ticks)]
    held = " ".join("{:.1f},{:.1f}".format(*xy(i, p[1])) for i, p in enumerate(points))
    parts.append(f'<polyline points="{held}" class="held"/>')
    if limit is not None:
        _, y = xy(0, limit[1])
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + inner_w:.1f}" y2="{y:.1f}" '
            f'class="limit"/><text x="{left + inner_w:.1f}" y="{y + 14:.1f}" '
            f'text-anchor="end" class="limitlbl">{escape(limit[0])} {escape(fmt_bytes(limit[1]))}'
            "</text>"
        )
    peaks = [(i, p[2]) for i, p in enumerate(points) if p[2] is not None]
    for i, value in peaks:
        x, y = xy(i, value)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="peakdot"/>')
    if peaks:
        i, value = max(peaks, key=lambda p: p[1])
        x, y = xy(i, value)
        # Right above its own marker: centred, or flush with it at either end of the chart.
        anchor = "start" if x < left + 60 else "end" if x > left + inner_w - 60 else "middle"
        dx = {"start": -4, "end": 4, "middle": 0}[anchor]
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" class="peak"/>'
            f'<text x="{x + dx:.1f}" y="{max(14.0, y - 11):.1f}" text-anchor="{anchor}" '
            f'class="peaklbl">peak {escape(fmt_bytes(value))} ({escape(points[i][0])})</text>'
        )
    every = max(1, len(points) // 12)
    for i, (label, _, _) in enumerate(points):
        if i % every == 0 or i == len(points) - 1:
            x, _ = xy(i, 0)
            parts.append(
                f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle" '
                f'class="tick">{escape(_short(label, 16))}</text>'
            )
    parts.append(f'<text x="{left}" y="{height - 12}" class="legend">{escape(legend)}</text></svg>')
    return Markup("".join(parts))


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """Axis values from 0 to at least ``top`` in round steps (1, 2, 2.5 or 5 times a power of
    ten bytes: 0, 500 MB, 1 GB, 1.5 GB …, never 684.4 MB)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    n = math.ceil(top / step - 1e-9)
    return [k * step for k in range(n + 1)]


def tick_label(value: float) -> str:
    """A round axis value as bytes, without a trailing ".0" ("500 MB", "1.5 GB")."""
    text = fmt_bytes(value)
    number, _, unit = text.partition(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}".strip()


def _open(height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_W} {height}" '
        f'role="img" aria-label="{escape(title)}"><text x="0" y="16" class="ttl">'
        f"{escape(title)}</text>"
    )


def _axis(left: int, width: float, height: float, ticks: list[float]) -> str:
    out = [f'<line x1="{left}" y1="30" x2="{left}" y2="{30 + height}" class="axis"/>']
    top = ticks[-1] or 1
    for value in ticks:
        y = 30 + height * (1 - value / top)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + width:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(tick_label(value))}</text>"
        )
    return "".join(out)


def _short(label: str, size: int = 28) -> str:
    return label if len(label) <= size else label[: size - 1] + "…"
