"""Small SVG charts drawn on the server (no JavaScript, no CDN): horizontal bars for a
breakdown, and memory over a run with the peak marked. Every label is escaped."""

from __future__ import annotations

from markupsafe import Markup, escape

from profiling.units import fmt_bytes

_W = 720
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
    row, left, right = 26, 200, 110
    height = 34 + row * len(items) + (18 if limit is not None else 0)
    parts = [_open(height, title)]
    for n, (label, value) in enumerate(items):
        y = 30 + n * row
        width = max(1.0, (_W - left - right) * value / top)
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" class="lbl">'
            f"{escape(_short(label))}</text>"
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


def timeline(points: list[tuple[str, float, float | None]], title: str) -> Markup:
    """Memory at each point of a run: (label, bytes held, peak within it or None); the highest
    peak is marked with its value."""
    if not points:
        return Markup("")
    top = 1.1 * max(max(held, peak or 0) for _, held, peak in points) or 1
    left, bottom, height = 90, 60, 300
    inner_w, inner_h = _W - left - 60, height - bottom - 30
    step = inner_w / max(1, len(points) - 1) if len(points) > 1 else 0

    def xy(i: int, value: float) -> tuple[float, float]:
        return left + i * step, 30 + inner_h * (1 - value / top)

    parts = [_open(height, title), _axis(left, inner_w, inner_h, top)]
    held = " ".join("{:.1f},{:.1f}".format(*xy(i, p[1])) for i, p in enumerate(points))
    parts.append(f'<polyline points="{held}" class="held"/>')
    peaks = [(i, p[2]) for i, p in enumerate(points) if p[2] is not None]
    for i, value in peaks:
        x, y = xy(i, value)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="peakdot"/>')
    if peaks:
        i, value = max(peaks, key=lambda p: p[1])
        x, y = xy(i, value)
        # The label reads leftwards from a peak in the right half, so it stays in the chart.
        anchor, dx = ("end", -10) if x > _W / 2 else ("start", 10)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" class="peak"/>'
            f'<text x="{x + dx:.1f}" y="{max(14.0, y - 8):.1f}" text-anchor="{anchor}" '
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
    parts.append(
        f'<text x="{left}" y="{height - 12}" class="legend">line: held at the end of each point; '
        "dots: the peak within it</text></svg>"
    )
    return Markup("".join(parts))


def _open(height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_W} {height}" '
        f'role="img" aria-label="{escape(title)}"><text x="0" y="16" class="ttl">'
        f"{escape(title)}</text>"
    )


def _axis(left: int, width: float, height: float, top: float) -> str:
    out = [f'<line x1="{left}" y1="30" x2="{left}" y2="{30 + height}" class="axis"/>']
    for k in range(5):
        value = top * k / 4
        y = 30 + height * (1 - k / 4)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + width:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(fmt_bytes(value))}</text>"
        )
    return "".join(out)


def _short(label: str, size: int = 28) -> str:
    return label if len(label) <= size else label[: size - 1] + "…"
