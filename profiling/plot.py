"""Breakdown charts (matplotlib, Agg backend, imported only when a chart is asked for)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from profiling.errors import ProfilingError
from profiling.units import GB

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from profiling.estimate.comparison import CompareRow, Comparison
    from profiling.estimate.memory import Estimate
    from profiling.trace.step import TraceResult


def _pyplot() -> ModuleType:  # matplotlib.pyplot
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ProfilingError("--plot needs matplotlib: pip install matplotlib") from None
    return plt


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise ProfilingError(f"cannot write {path}: directory {path.parent} does not exist")
    import matplotlib

    fig.tight_layout()
    # SVG keeps its words as text (searchable, readable by a screen reader or a test), not as
    # glyph outlines.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(path, dpi=120)
    return path


def plot_estimate(est: Estimate, path: str | Path) -> Path:
    """The step's moments per GPU (what is alive at each), the peak marked, against the GPU.

    The headline is the peak — the largest moment, what the table and the record give — not the
    sum of the table's rows: activations are freed before the optimizer step allocates its
    temporaries, so the rows never all coexist."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = [m.name for m in est.moments]
    values = [m.bytes / GB for m in est.moments]
    colors = ["tab:red" if m.name == est.peak_moment else "tab:blue" for m in est.moments]
    bars = ax.barh(names, values, color=colors)
    # The step's order, top to bottom, and a free row at the bottom for the legend.
    ax.set_ylim(len(names) + 0.3, -0.6)
    for bar, value in zip(bars, values, strict=True):
        ax.text(value, bar.get_y() + bar.get_height() / 2, f" {value:.2f} GB", va="center")
    bars[names.index(est.peak_moment)].set_label(f"peak: {est.peak_moment}")
    if est.gpu_mem_bytes:
        ax.axvline(
            est.gpu_mem_bytes / GB,
            color="black",
            linestyle="--",
            label=f"GPU memory {est.gpu_mem_bytes / GB:.0f} GB",
        )
    ax.set_xlim(0, max([*values, (est.gpu_mem_bytes or 0) / GB]) * 1.25)
    ax.set_xlabel("GB (10^9 bytes) per GPU")
    # Words, not the ✅/❌ glyphs: matplotlib's default font has none of them.
    verdict = {True: " (fits)", False: " (does not fit)", None: ""}[est.fits]
    ax.set_title(
        f"Estimated peak per GPU: {est.per_gpu_bytes / GB:.2f} GB{verdict}\n"
        f"{est.inputs.describe()}",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower right", ncol=2)  # inside the axes: never cut off
    return _save(fig, path)


def plot_trace(result: TraceResult, path: str | Path) -> Path:
    """Stacked bars by category after forward, after backward, after the step, and at peak."""
    plt = _pyplot()
    columns = {
        "after forward": result.phases.get("after_forward", {}),
        "after backward": result.phases.get("after_backward", {}),
        "after step": result.phases.get("after_optimizer_step", {}),
        "peak": result.by_category,
    }
    cats = [c for c in result.by_category if any(col.get(c) for col in columns.values())]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottoms = [0.0] * len(columns)
    for cat in cats:
        vals = [col.get(cat, 0) / GB for col in columns.values()]
        ax.bar(list(columns), vals, bottom=bottoms, label=cat)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("GB (10^9 bytes)")
    from profiling.trace.report import describe_trace_setup

    ax.set_title(
        f"Traced memory: peak {result.peak_bytes / GB:.2f} GB\n"
        f"{describe_trace_setup(result.config)}",
        fontsize=9,
    )
    ax.set_ylim(0, max(bottoms) * 1.4)  # headroom: the legend sits inside, above the bars
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    return _save(fig, path)


def plot_compare(cmp: Comparison, path: str | Path) -> Path:
    """Estimated and traced bytes side by side per category, then the total against the peak."""
    plt = _pyplot()
    rows: list[CompareRow] = [
        *cmp["rows"],
        {
            "category": "total / peak",
            "estimated_bytes": cmp["estimated_total"],
            "traced_bytes": cmp["traced_peak"],
            "ratio": cmp["ratio"],
            "why": cmp["why_total"],
        },
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["estimated_bytes"] / GB for r in rows], 0.4, label="estimated")
    ax.bar([i + 0.2 for i in x], [r["traced_bytes"] / GB for r in rows], 0.4, label="traced")
    ax.set_xticks(list(x), [r["category"] for r in rows])
    ax.set_ylabel("GB (10^9 bytes)")
    ax.set_title("Estimate beside trace (per GPU / per rank)")
    ax.legend()
    return _save(fig, path)
