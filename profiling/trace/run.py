"""A trace as the CLI and the agents' tool run it: trace, save the record, compare, render.

One function for both (``journal-agent trace`` and the ``MemoryTrace`` tool), so they report
the same thing the same way: :func:`trace_and_record`. Light to import; the trace itself
imports torch when it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from profiling.errors import ProfilingError
from profiling.estimate.comparison import Comparison
from profiling.records import MeasurementRecord, RecordStore
from profiling.time_bound import TimeBound

# What to do when a trace runs out of time (profiling.time_bound says the rest of the sentence).
TRACE_HINT = (
    "give it a longer timeout, or trace fewer ranks, a smaller model, batch or sequence "
    "(estimate has no such limit)"
)

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.run import EstimateRun


class TraceRun(BaseModel):
    """What one run produced: the result, its saved record, and the JSON / text views."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # profiling.trace.step.TraceResult: pydantic needs the class at run time, and importing it
    # here would import torch with this light module.
    result: Any
    record: MeasurementRecord
    payload: dict[str, Any]  # the --json output
    estimate_record: MeasurementRecord | None = None
    comparison: Comparison | None = None

    def text(self) -> str:
        """The report: the trace's table, the verdict, the record to cite, the comparison."""
        from profiling.trace.report import render_compare_text, render_trace_text

        lines = [render_trace_text(self.result)]
        if self.payload.get("verdict"):
            lines.append(self.payload["verdict"])
        lines.append(_cite_line(self.record))
        if self.comparison is not None and self.estimate_record is not None:
            est = self.estimate_record
            lines += [
                "",
                est.extra["table"],
                _cite_line(est),
                "",
                f"Estimate {est.citation()} beside trace {self.record.citation()} "
                "(per GPU / per rank):",
                render_compare_text(self.comparison),
            ]
        if self.payload.get("plot"):
            lines.append(f"plot: {self.payload['plot']}")
        if self.payload.get("snapshot"):
            lines.append(
                f"memory snapshot: {self.payload['snapshot']} (drop it on "
                "https://pytorch.org/memory_viz)"
            )
        return "\n".join(lines)


def _cite_line(record: MeasurementRecord) -> str:
    return f"record: {record.id}  (cite as {record.citation()})"


def trace_and_record(
    config: TrainingConfig,
    store: RecordStore,
    *,
    compare_estimate: bool = False,
    module_depth: int = 2,
    plot: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    snapshot: str | Path | None = None,
    timeout: float | None = None,
) -> TraceRun:
    """Trace ``config`` (a :class:`~profiling.config.TrainingConfig`), save the record in
    ``store`` (a :class:`~profiling.records.RecordStore`), and with ``compare_estimate`` save
    the closed-form estimate of the same step beside it; with ``snapshot``, write the traced
    allocations as a memory snapshot for PyTorch's memory viewer
    (``profiling.trace.snapshot_export``). Raises ProfilingError on bad input — an
    impossible comparison before the (possibly long) trace, not after it — and
    :class:`~profiling.time_bound.TimedOut` when the trace runs past ``timeout`` seconds."""
    from profiling.trace.report import (
        estimate_input_for_trace,
        trace_json,
        trace_record,
        trace_verdict,
    )
    from profiling.trace.step import trace_step

    if config.is_plan:  # every rank of a plan: profiling.plans, never one averaged GPU
        raise ProfilingError(
            "a parallel plan (--pp, --cp, --dp-shard, --dp-replicate) is traced per rank by "
            "profiling.plans.trace.trace_plan ('journal-agent trace' runs it)"
        )
    if compare_estimate:
        estimate_input_for_trace(config)
    recorder = None
    if snapshot is not None:
        from profiling.trace.snapshot_export import SnapshotRecorder

        recorder = SnapshotRecorder()
    observe = recorder.attach if recorder is not None else None
    with trace_bound(timeout, config):
        result = trace_step(config, progress=progress, module_depth=module_depth, observe=observe)
    if recorder is not None and snapshot is not None:
        from profiling.trace.snapshot_export import write_snapshot

        write_snapshot(recorder.snapshot(), Path(snapshot))
    gpu_mem = config.gpu_mem_bytes()
    gpu_mem_gb = gpu_mem / 1e9 if gpu_mem else None
    record = trace_record(result, gpu_mem_gb)
    store.save(record)
    payload = trace_json(result, record.id)
    payload.update(trace_verdict(result, gpu_mem_gb))
    run = TraceRun(result=result, record=record, payload=payload)
    payload = run.payload  # the model holds its own copy: add to that one
    if compare_estimate:
        from profiling.estimate.memory import estimate
        from profiling.estimate.record import estimate_record
        from profiling.trace.report import compare

        est = estimate(estimate_input_for_trace(result.config))
        run.estimate_record = estimate_record(est)
        store.save(run.estimate_record)
        run.comparison = compare(est, result)
        payload["estimate"] = {
            "record_id": run.estimate_record.id,
            "per_gpu_bytes": est.per_gpu_bytes,
        }
        payload["comparison"] = run.comparison
    if plot is not None:
        from profiling.plot import plot_compare, plot_trace

        made = (
            plot_compare(run.comparison, plot)
            if run.comparison is not None
            else plot_trace(result, plot)
        )
        payload["plot"] = str(made)
    if snapshot is not None:
        payload["snapshot"] = str(snapshot)
    return run


def trace_bound(timeout: float | None, config: TrainingConfig) -> TimeBound:
    """The time bound of one trace of ``config`` (None: unbounded)."""
    return TimeBound(timeout, f"the trace of {config.model}", TRACE_HINT)


def trace_beside_estimate(
    run: EstimateRun,
    store: RecordStore,
    *,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> EstimateRun:
    """Trace the step an :class:`~profiling.estimate.run.EstimateRun` estimated, save the
    trace's record in ``store``, and put the trace and the comparison in ``run`` (its payload
    too). Raises ProfilingError for what a trace cannot reproduce, before tracing, and
    :class:`~profiling.time_bound.TimedOut` past ``timeout`` seconds."""
    from profiling.trace.report import compare, trace_config_for_estimate, trace_json, trace_record
    from profiling.trace.step import trace_step

    config = trace_config_for_estimate(run.estimate)
    with trace_bound(timeout, config):
        result = trace_step(config, progress=progress)
    run.trace = result
    run.trace_record = trace_record(result)
    store.save(run.trace_record)
    run.comparison = compare(run.estimate, result)
    run.payload["trace"] = trace_json(result, run.trace_record.id)
    run.payload["comparison"] = run.comparison
    return run
