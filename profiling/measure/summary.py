"""What a measured run's summary holds: per phase, per step, spikes, out-of-memory, totals."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from profiling.measure.snapshot import MemorySnapshot
from profiling.measure.stats import Spread


class PhaseStats(BaseModel):
    name: str
    steps: int
    peak_bytes: int  # the highest peak of this phase over all steps
    peak_step: int | None
    mean_bytes: float  # of the per-step peaks
    min_bytes: int
    max_bytes: int
    end_bytes: int  # memory held when the phase ended, last step
    time: Spread | None = None  # seconds, warm-up steps excluded


class StepStats(BaseModel):
    step: int
    peak_bytes: int
    end_bytes: int
    time_s: float | None
    warmup: bool
    rss: int | None = None
    reserved: int | None = None
    nvml_used: int | None = None


class Spike(BaseModel):
    step: int
    phase: str  # a phase name, or "(step)" for the whole step's peak
    peak_bytes: int
    median_bytes: float
    excess_pct: float


class OomEvent(BaseModel):
    step: int | None
    phase: str | None
    message: str
    snapshot: MemorySnapshot


class ProfileSummary(BaseModel):
    """Everything the report, the JSON and the record are made from."""

    device: dict[str, Any]
    memory_kind: str  # what 'bytes' means on this device
    warmup: int
    steps_recorded: int
    peak_bytes: int
    peak_step: int | None
    peak_phase: str | None
    phases: list[PhaseStats]
    steps: list[StepStats]
    spikes: list[Spike]
    spike_threshold: float
    step_time: Spread | None
    backward_forward_ratio: float | None = None
    tokens_per_step: int | None = None
    tokens_per_s: float | None = None
    flops_per_step: float | None = None
    flops_per_s: float | None = None
    rss_start: int | None = None
    rss_end: int | None = None
    uss_start: int | None = None
    uss_end: int | None = None
    rss_high_water: int | None = None
    overhead_s_per_step: float | None = None  # the profiler's own time per step
    ops_per_step: float | None = None  # CPU live-tensor accounting: operators seen per step
    oom: OomEvent | None = None
    # The warm-up steps' own peak where it is above the headline (None where it is not): step 0
    # runs torch's FlopCounterMode and makes the optimizer's state, which no later step does
    warmup_peak_bytes: int | None = None
    warmup_peak_step: int | None = None
    warmup_peak_phase: str | None = None
    last: MemorySnapshot | None = None  # the device's full reading at the last step
    peak_reserved: int | None = None  # CUDA: the allocator's reserved peak over the run
    notes: list[str] = Field(default_factory=list)

    @property
    def warmup_peak(self) -> dict[str, Any] | None:
        """The warm-up steps' peak above the headline (bytes, step, phase), or None."""
        if self.warmup_peak_bytes is None:
            return None
        return {"bytes": self.warmup_peak_bytes, "step": self.warmup_peak_step,
                "phase": self.warmup_peak_phase}  # fmt: skip

    def warmup_line(self, fmt: Callable[[int], str]) -> str:
        """The report's line for the warm-up peak (``warmup_peak_bytes`` is set)."""
        at = f"step {self.warmup_peak_step}" + (
            f", {self.warmup_peak_phase}" if self.warmup_peak_phase else ""
        )
        return (
            f"Warm-up peak: {fmt(self.warmup_peak_bytes or 0)} at {at} (the optimizer's state "
            "made, FLOPs counted: not a steady step's, so not the headline)"
        )


Peak = tuple[int, int | None, str | None]  # bytes, step, phase


def _highest(phases: list[MemorySnapshot], steps: list[MemorySnapshot]) -> Peak:
    """The highest of these phases' and steps' peaks, where it was (a step's peak equal to one
    of its phases' happened in that phase)."""
    candidates = [(s.peak, s.step, s.phase) for s in phases] + [
        (s.peak, s.step, None) for s in steps
    ]
    peak, step, phase = max(candidates, key=lambda c: c[0], default=(0, None, None))
    if phase is None and step is not None:
        phase = next((s.phase for s in phases if s.step == step and s.peak == peak), None)
    return int(peak), step, phase


def headline_peak(
    phases: list[MemorySnapshot], steps: list[MemorySnapshot], oom: OomEvent | None
) -> tuple[Peak, Peak | None]:
    """The run's headline peak — the steady steps' (those after the warm-up), or every step's
    where all are warm-up — and the warm-up steps' where it is higher, else None.

    Warm-up step 0 is not the user's steady step: torch's FlopCounterMode counts its FLOPs (its
    module tracker holds the step's outputs until it exits: 4.0 MB at step 0's optimizer on
    audit6's GPT-NeoX toy, every later step 3.5 MB), and it makes the optimizer's state. An
    out-of-memory error is the headline whenever it came."""
    steady = [s for s in steps if not s.warmup]
    if not steady or oom is not None:
        top = _highest(phases, steps)
        if oom is not None and oom.snapshot.peak > top[0]:
            top = (int(oom.snapshot.peak), oom.step, oom.phase)
        return top, None
    top = _highest([p for p in phases if not p.warmup], steady)
    warm = _highest([p for p in phases if p.warmup], [s for s in steps if s.warmup])
    return top, warm if warm[0] > top[0] else None


def write_csv(snapshots: list[MemorySnapshot], path: Path) -> None:
    """One row per phase and per step: memory, peak and time, with the device's columns."""
    columns = [
        "step",
        "phase",
        "row",
        "warmup",
        "t_s",
        "duration_s",
        "current_bytes",
        "peak_bytes",
        "reserved_bytes",
        "peak_reserved_bytes",
        "active_bytes",
        "alloc_retries",
        "ooms",
        "nvml_used_bytes",
        "rss_bytes",
    ]
    import io

    handle = io.StringIO(newline="")  # written whole below: never through a link at ``path``
    writer = csv.writer(handle)
    writer.writerow(columns)
    for s in snapshots:
        row = [
            s.step,
            s.phase or ("(step)" if s.at == "step" else ""),
            s.at,
            int(s.warmup),
            f"{s.t:.6f}",
            "" if s.duration_s is None else f"{s.duration_s:.9f}",
            s.current,
            s.peak,
            s.reserved,
            s.peak_reserved,
            s.active,
            s.alloc_retries,
            s.ooms,
            s.nvml_used,
            s.rss,
        ]
        writer.writerow(["" if v is None else v for v in row])
    from profiling import _files

    out = Path(path).absolute()  # the folder the user named, as given; the name never followed
    _files.replace(out.parent, out, handle.getvalue().encode("utf-8"))
