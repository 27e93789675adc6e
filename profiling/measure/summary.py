"""What a measured run's summary holds: per phase, per step, spikes, out-of-memory, totals."""

from __future__ import annotations

import csv
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
    last: MemorySnapshot | None = None  # the device's full reading at the last step
    peak_reserved: int | None = None  # CUDA: the allocator's reserved peak over the run
    notes: list[str] = Field(default_factory=list)


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
