"""Breakdown charts (matplotlib, Agg backend, imported only when a chart is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError
from profiling.units import GB


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ProfilingError("--plot needs matplotlib: pip install matplotlib") from None
    return plt


def _save(fig: Any, path: Path) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise ProfilingError(f"cannot write {path}: directory {path.parent} does not exist")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def plot_estimate(est: Any, path: Path) -> Path:
    """One stacked bar per GPU (components) against the GPU size."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    left = 0.0
    cmap = plt.get_cmap("tab20")
    for i, c in enumerate(est.components):
        ax.barh(["per GPU"], [c.bytes / GB], left=left, color=cmap(i % 20), label=c.name)
        left += c.bytes / GB
    if est.gpu_mem_bytes:
        ax.axvline(est.gpu_mem_bytes / GB, color="black", linestyle="--", label="GPU memory")
    ax.set_xlabel("GB (10^9 bytes)")
    # Words, not the ✅/❌ glyphs: matplotlib's default font has none of them.
    verdict = {True: " (fits)", False: " (does not fit)", None: ""}[est.fits]
    ax.set_title(f"Estimated memory per GPU: {left:.2f} GB{verdict}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return _save(fig, path)


def plot_trace(result: Any, path: Path) -> Path:
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
    ax.set_title(f"Traced memory: {result.config.model} (peak {result.peak_bytes / GB:.2f} GB)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_compare(cmp: dict[str, Any], path: Path) -> Path:
    """Estimated and traced bytes side by side per category, then the total against the peak."""
    plt = _pyplot()
    rows = [
        *cmp["rows"],
        {
            "category": "total / peak",
            "estimated_bytes": cmp["estimated_total"],
            "traced_bytes": cmp["traced_peak"],
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
