"""The measured run as a chart: peak memory per phase over the steps, and time per phase."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.plot import _pyplot, _save
from profiling.units import GB


def plot_profile(summary: Any, snapshots: list[Any], path: Path) -> Path:
    """Left: each phase's peak (and the step's) per step, warm-up shaded. Right: median time
    per phase with its interquartile range."""
    plt = _pyplot()
    top = max([summary.peak_bytes, 1])
    scale, unit = (GB, "GB (10^9 bytes)") if top >= GB else (1e6, "MB (10^6 bytes)")
    fig, (mem, tim) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    names = [p.name for p in summary.phases]
    for name in names:
        pts = [(s.step, s.peak / scale) for s in snapshots if s.at == "phase" and s.phase == name]
        mem.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
    steps = [(s.step, s.peak / scale) for s in snapshots if s.at == "step"]
    mem.plot([p[0] for p in steps], [p[1] for p in steps], "k--", lw=1, label="step peak")
    warm = [st.step for st in summary.steps if st.warmup]
    if warm:
        mem.axvspan(min(warm) - 0.5, max(warm) + 0.5, color="0.9", label="warm-up")
    for sp in summary.spikes:
        mem.annotate("spike", (sp.step, sp.peak_bytes / scale), color="red", fontsize=8)
    if summary.oom is not None:
        o = summary.oom
        mem.scatter([o.step], [o.snapshot.peak / scale], color="red", marker="x", s=60, label="OOM")
    mem.set_xlabel("step")
    mem.set_ylabel(f"peak {unit}")
    mem.set_title(f"Peak memory ({summary.device.get('label', '')})")
    mem.legend(fontsize=7)
    timed = [p for p in summary.phases if p.time]
    tim.bar(
        [p.name for p in timed],
        [p.time.median * 1e3 for p in timed],
        # The bar is the median; the whisker spans the quartiles (asymmetric, not ± IQR/2).
        yerr=[
            [(p.time.median - p.time.q1) * 1e3 for p in timed],
            [(p.time.q3 - p.time.median) * 1e3 for p in timed],
        ],
        capsize=4,
    )
    tim.set_ylabel("median ms (whiskers: quartiles)")
    n = summary.step_time.n if summary.step_time else 0
    tim.set_title(f"Time per phase ({n} timed steps)")
    return _save(fig, path)
