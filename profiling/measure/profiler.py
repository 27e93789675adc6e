"""``MemoryProfiler``: measured memory and time of a real training loop, by step and phase.

    prof = MemoryProfiler()                 # CUDA if torch sees one, else CPU
    prof.start()
    for step in range(n):
        with prof.phase("forward"):  loss = model(x)
        with prof.phase("backward"): loss.backward()
        with prof.phase("optimizer"): opt.step(); opt.zero_grad()
        prof.record_step(step)              # or record_step(step, phase) at points you choose
    print(prof.report())

Every boundary (a phase entered or left, a ``record_step``) closes an *interval*: its peak
memory (the allocator's peak, reset at each boundary on CUDA; the live-tensor peak on CPU) and
its time. A phase is the interval inside its ``with``; memory between phases still counts
toward the step's peak. Times: ``perf_counter`` on CPU; CUDA events on GPU, resolved once the
GPU has passed them (``Event.query``) — the loop never waits for the GPU; one ``synchronize``
when the profiler stops. NVTX ranges name the phases for Nsight.

The first ``warmup`` steps are measured but left out of the timing statistics (and the
report says so): they pay for lazy optimizer state, allocator growth and kernel selection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from profiling.errors import ProfilingError
from profiling.measure.backends import Backend, RawReading, pick_backend
from profiling.measure.devices import rss_high_water_bytes, uss_bytes
from profiling.measure.snapshot import MemorySnapshot
from profiling.measure.stats import Spread, running_median_spikes
from profiling.measure.summary import (
    OomEvent,
    PhaseStats,
    ProfileSummary,
    Spike,
    StepStats,
    headline_peak,
    write_csv,
)


class _Phase:
    """``with prof.phase(name)``: a plain class, not a generator (it runs three times a step)."""

    __slots__ = ("_name", "_prof")

    def __init__(self, prof: MemoryProfiler, name: str) -> None:
        self._prof, self._name = prof, name

    def __enter__(self) -> None:
        self._prof._enter_phase(self._name)

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> bool:
        self._prof._exit_phase(self._name, exc)
        return False  # never swallow the exception


# What closed an interval (MemorySnapshot.at).
At = Literal["phase", "step", "point", "oom"]


@dataclass(slots=True)
class _Row:
    """One closed interval, kept as plain data while the loop runs (pydantic only at the end)."""

    reading: RawReading
    at: At
    step: int | None
    phase: str | None
    t: float
    warmup: bool
    duration_s: float | None = None

    def snapshot(self) -> MemorySnapshot:
        return MemorySnapshot(
            **self.reading.fields(),
            step=self.step,
            phase=self.phase,
            at=self.at,
            t=self.t,
            duration_s=self.duration_s,
            warmup=self.warmup,
        )


class MemoryProfiler:
    """Measure memory and time per step and phase on this machine's device.

    ``device``: None/"auto" (CUDA if torch sees one, else CPU), "cpu", "cuda", "cuda:N".
    ``warmup``: leading steps excluded from timing statistics. ``spike_threshold``: a peak
    more than this fraction above the running median of earlier peaks of the same phase is a
    spike. ``track_tensors`` (CPU): count live tensor bytes exactly (default on; costs a few µs
    per operator — off gives times with nothing in the way, and RSS only).
    ``tokens_per_step`` / ``flops_per_step`` turn step times into tokens/s and FLOP/s.
    """

    def __init__(
        self,
        device: str | None = None,
        *,
        warmup: int = 1,
        spike_threshold: float = 0.2,
        track_tensors: bool = True,
        tokens_per_step: int | None = None,
        flops_per_step: float | None = None,
        nvtx: bool = True,
    ) -> None:
        if warmup < 0:
            raise ProfilingError(f"warmup must be 0 or more steps, not {warmup}")
        if spike_threshold <= 0:
            raise ProfilingError(
                f"spike_threshold is a fraction above the running median (0.2 = 20 %), "
                f"not {spike_threshold}"
            )
        self.backend: Backend = pick_backend(device)
        self.warmup = warmup
        self.spike_threshold = spike_threshold
        self.track_tensors = track_tensors
        self.tokens_per_step = tokens_per_step
        self.flops_per_step = flops_per_step
        self.nvtx = nvtx
        self._rows: list[_Row] = []
        self._snapshots: list[MemorySnapshot] = []
        self.oom: OomEvent | None = None
        self.notes: list[str] = []
        self._started = False
        self._stopped = False
        self._t0 = 0.0
        self._phase: str | None = None
        self._mark: Any = None  # time mark of the last boundary
        self._step_mark: Any = None  # time mark where the current step began
        self._step_peak = 0
        self._pending: list[tuple[_Row, Any, Any]] = []  # this step's intervals and marks
        # Closed intervals whose time marks the GPU may not have reached yet (CUDA events).
        self._unresolved: list[tuple[_Row, Any, Any]] = []
        self._own = 0.0  # seconds spent inside the profiler's own calls
        self._ops_at_start = 0
        self._steps = 0
        self._rss_start: int | None = None
        self._uss_start: int | None = None
        self._uss_end: int | None = None

    @property
    def device(self) -> str:
        return self.backend.label

    # ------------------------------------------------------------------ lifecycle

    @property
    def snapshots(self) -> list[MemorySnapshot]:
        """Every phase and step closed so far (and the out-of-memory moment, if any)."""
        if len(self._snapshots) != len(self._rows):
            self._snapshots = [row.snapshot() for row in self._rows]
        return self._snapshots

    def start(self) -> MemorySnapshot:
        """Begin measuring; returns the baseline (what is allocated before the first step)."""
        if self._started:
            raise ProfilingError("this MemoryProfiler has already started; make a new one")
        self.backend.start(track_tensors=self.track_tensors)
        self._started = True
        self._uss_start = uss_bytes() if self.backend.kind == "cpu" else None
        self._t0 = time.perf_counter()
        base = self._read("point", None, None, reset=True, process=True)
        self._rss_start = base.reading.rss
        self._step_peak = base.reading.current
        self._mark = self._step_mark = self.backend.mark()
        self._ops_at_start = self.backend.live_ops()
        return base.snapshot()

    def stop(self) -> None:
        """Stop watching (CPU: leaves the tensor-accounting mode). ``report`` calls it."""
        if self._started and not self._stopped:
            self._resolve(wait=True)  # the one synchronize of the run
            self.backend.stop()
            self._uss_end = uss_bytes() if self.backend.kind == "cpu" else None
            self._stopped = True

    def __enter__(self) -> MemoryProfiler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _require_running(self) -> None:
        if not self._started:
            raise ProfilingError("call MemoryProfiler.start() before measuring")
        if self._stopped:
            raise ProfilingError("this MemoryProfiler has stopped; make a new one to measure again")

    # ------------------------------------------------------------------ measuring

    def _read(
        self, at: At, step: int | None, phase: str | None, reset: bool, process: bool = False
    ) -> _Row:
        reading = self.backend.read(reset_peak=reset, with_process=process)
        return _Row(
            reading, at, step, phase, time.perf_counter() - self._t0, self._steps < self.warmup
        )

    def _close_interval(self, phase: str | None, at: At, process: bool = False) -> _Row:
        """Read memory (resetting its peak) and the time mark for the interval now ending."""
        row = self._read(at, None, phase, reset=True, process=process)
        reading = row.reading
        self._step_peak = max(self._step_peak, reading.peak, reading.current)
        end = self.backend.mark()
        self._pending.append((row, self._mark, end))
        self._mark = end
        return row

    def phase(self, name: str) -> _Phase:
        """Measure the block as phase ``name``: its peak memory, the memory at its end, its time.

        Use it as ``with prof.phase("forward"): ...``. An out-of-memory error inside it is
        recorded (step, phase, memory at that moment) in :attr:`oom` and re-raised.
        """
        return _Phase(self, name)

    def _enter_phase(self, name: str) -> None:
        began = time.perf_counter()
        self._require_running()
        if self._phase is not None:
            raise ProfilingError(
                f"phase {name!r} started inside phase {self._phase!r}; phases do not nest"
            )
        # The stretch since the last boundary (code between phases) still counts for the step.
        self._close_interval(None, "point")
        self._phase = name
        if self.nvtx:
            self.backend.range_push(name)
        self._own += time.perf_counter() - began

    def _exit_phase(self, name: str, exc: BaseException | None) -> None:
        ended = time.perf_counter()
        if self.nvtx:
            self.backend.range_pop()
        self._phase = None
        if exc is None:
            self._close_interval(name, "phase")
        elif self.backend.is_oom(exc):
            self._record_oom(name, exc)
        self._own += time.perf_counter() - ended

    def _record_oom(self, phase: str | None, exc: BaseException) -> None:
        row = self._read("oom", self._next_step(), phase, reset=False, process=True)
        row.reading.peak = max(row.reading.peak, self._step_peak)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self._rows.append(row)
        self.oom = OomEvent(
            step=row.step, phase=phase, message=first[:400], snapshot=row.snapshot()
        )

    def _next_step(self) -> int:
        steps = [r.step for r in self._rows if r.at == "step" and r.step is not None]
        return steps[-1] + 1 if steps else 0

    def record_step(self, step: int, phase: str | None = None) -> None:
        """Close step ``step``: its peak (over its phases and the code between them), its time,
        and the process / NVML view at its end.

        ``phase`` (the seed profiler's style, without ``with prof.phase``): the stretch since
        the previous call is recorded as that phase first. The readings are in
        :attr:`snapshots`; nothing is returned, to keep the call cheap.
        """
        began = time.perf_counter()
        self._require_running()
        if self._phase is not None:
            raise ProfilingError(f"record_step({step}) inside phase {self._phase!r}; call it after")
        if phase is not None:
            self._close_interval(phase, "phase")
        row = self._close_interval(None, "step", process=True)
        row.reading.peak = self._step_peak
        # Its duration: from the step's first boundary to now.
        self._pending[-1] = (row, self._step_mark, self._pending[-1][2])
        self._step_mark = self._pending[-1][2]
        self._resolve(step)
        self._step_peak = row.reading.current
        self._steps += 1
        self._own += time.perf_counter() - began

    def _resolve(self, step: int | None = None, wait: bool = False) -> None:
        """Give this step's intervals their step number, and every interval whose time marks
        the device has passed its duration. Never waits for the GPU unless ``wait`` (at the
        end): a synchronize per step would stall the loop (issue 23: 48 % of a step)."""
        for row, a, b in self._pending:
            if step is not None:
                row.step = step
            if row.at in ("phase", "step"):
                self._rows.append(row)
                self._unresolved.append((row, a, b))
        self._pending.clear()
        if wait and self._unresolved:
            self.backend.synchronize()
        done = 0
        for row, a, b in self._unresolved:
            if not (wait or self.backend.ready(b)):
                break  # events complete in order: the rest are later still
            row.duration_s = self.backend.elapsed(a, b)
            done += 1
        del self._unresolved[:done]

    # ------------------------------------------------------------------ results

    def _step_snaps(self) -> list[MemorySnapshot]:
        return [s for s in self.snapshots if s.at == "step"]

    def summary(self) -> ProfileSummary:
        """The numbers: per phase and step, spikes, time statistics, throughput."""
        if not self._started:
            raise ProfilingError("nothing measured: call start(), run steps, record_step()")
        self.stop()
        steps = self._step_snaps()
        phase_snaps = [s for s in self.snapshots if s.at == "phase"]
        names: list[str] = []
        for s in phase_snaps:
            if s.phase not in names:
                names.append(s.phase or "")
        phases = [self._phase_stats(n, [s for s in phase_snaps if s.phase == n]) for n in names]
        step_stats = [
            StepStats(
                step=s.step if s.step is not None else i,
                peak_bytes=s.peak,
                end_bytes=s.current,
                time_s=s.duration_s,
                warmup=s.warmup,
                rss=s.rss,
                reserved=s.reserved,
                nvml_used=s.nvml_used,
            )
            for i, s in enumerate(steps)
        ]
        timed = [s.time_s for s in step_stats if not s.warmup and s.time_s is not None]
        step_time = Spread.of(timed)
        (peak, peak_step, peak_phase), warm = headline_peak(phase_snaps, steps, self.oom)
        by_name = {p.name: p for p in phases}
        ratio = None
        fwd, bwd = by_name.get("forward"), by_name.get("backward")
        if fwd and bwd and fwd.time and bwd.time and fwd.time.median > 0:
            ratio = bwd.time.median / fwd.time.median
        median = step_time.median if step_time else None
        n_steps = max(len(steps), 1)
        ops = self.backend.live_ops() - self._ops_at_start if self.backend.tracks_tensors else None
        return ProfileSummary(
            device=self.backend.describe(),
            memory_kind=self.memory_kind,
            warmup=self.warmup,
            steps_recorded=len(steps),
            peak_bytes=int(peak),
            peak_step=peak_step,
            peak_phase=peak_phase,
            phases=phases,
            steps=step_stats,
            spikes=self._spikes(names, phase_snaps, steps),
            spike_threshold=self.spike_threshold,
            step_time=step_time,
            backward_forward_ratio=ratio,
            tokens_per_step=self.tokens_per_step,
            tokens_per_s=self.tokens_per_step / median if self.tokens_per_step and median else None,
            flops_per_step=self.flops_per_step,
            flops_per_s=self.flops_per_step / median if self.flops_per_step and median else None,
            rss_start=self._rss_start,
            rss_end=steps[-1].rss if steps else None,
            uss_start=self._uss_start,
            uss_end=self._uss_end,
            rss_high_water=rss_high_water_bytes() if self.backend.kind == "cpu" else None,
            overhead_s_per_step=self._own / n_steps if steps else None,
            ops_per_step=(ops / n_steps) if ops is not None and steps else None,
            oom=self.oom,
            warmup_peak_bytes=warm[0] if warm else None,
            warmup_peak_step=warm[1] if warm else None,
            warmup_peak_phase=warm[2] if warm else None,
            last=steps[-1] if steps else None,
            peak_reserved=max((s.peak_reserved or 0 for s in self.snapshots), default=None)
            if self.backend.kind == "cuda"
            else None,
            notes=list(self.notes),
        )

    @property
    def memory_kind(self) -> str:
        if self.backend.kind == "cuda":
            return "CUDA caching allocator: allocated bytes (torch.cuda.memory_stats)"
        if self.backend.tracks_tensors:
            return "live CPU torch tensor bytes (exact, counted from the tensors)"
        return "process RSS only (live-tensor accounting off)"

    def _phase_stats(self, name: str, snaps: list[MemorySnapshot]) -> PhaseStats:
        peaks = [s.peak for s in snaps]
        top = max(snaps, key=lambda s: s.peak)
        times = [s.duration_s for s in snaps if not s.warmup and s.duration_s is not None]
        return PhaseStats(
            name=name,
            steps=len(snaps),
            peak_bytes=top.peak,
            peak_step=top.step,
            mean_bytes=sum(peaks) / len(peaks),
            min_bytes=min(peaks),
            max_bytes=max(peaks),
            end_bytes=snaps[-1].current,
            time=Spread.of(times),
        )

    def _spikes(
        self, names: list[str], phase_snaps: list[MemorySnapshot], steps: list[MemorySnapshot]
    ) -> list[Spike]:
        series = [(n, [s for s in phase_snaps if s.phase == n]) for n in names]
        series.append(("(step)", steps))
        out = []
        for name, snaps in series:
            peaks = [s.peak for s in snaps]
            for i, value, med in running_median_spikes(peaks, self.spike_threshold):
                step = snaps[i].step
                out.append(
                    Spike(
                        step=step if step is not None else i,
                        phase=name,
                        peak_bytes=int(value),
                        median_bytes=med,
                        excess_pct=100.0 * (value / med - 1),
                    )
                )
        return sorted(out, key=lambda s: (s.step, s.phase))

    def report(self) -> str:
        """The report as text: peaks per step and phase, spikes, statistics, time per phase."""
        from profiling.measure.report import render_summary

        return render_summary(self.summary())

    def to_csv(self, path: str | Path) -> Path:
        """One row per phase and per step: memory, peak and time, with the device's columns."""
        path = Path(path)
        if not path.parent.is_dir():
            raise ProfilingError(f"cannot write {path}: directory {path.parent} does not exist")
        self.stop()
        write_csv(self.snapshots, path)
        return path

    def plot(self, path: str | Path) -> Path:
        """A PNG: peak memory per phase and step over the run, and time per phase."""
        from profiling.measure.plot import plot_profile

        return plot_profile(self.summary(), self.snapshots, Path(path))

    def save_record(
        self,
        directory: str | Path,
        title: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> str:
        """Save a ``measured`` record (device, driver, software versions, results) and return
        its id; cite it as ``[m:<id>]``."""
        from profiling.measure.report import measured_record
        from profiling.records import RecordStore

        record = measured_record(self.summary(), title=title, config=config or {})
        return RecordStore(Path(directory)).save(record)
