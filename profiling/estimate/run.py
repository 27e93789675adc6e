"""An estimate as the CLI and the agents' tool run it: estimate, save the record, render.

The estimate's twin of :func:`profiling.trace.run.trace_and_record`: one function for
``journal-agent estimate`` and the ``MemoryEstimate`` tool, so both save and report the same
thing. ``--compare-trace`` adds the trace of the same step with
:func:`profiling.trace.run.trace_beside_estimate` (the trace wing may import this one, not the
other way round).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from profiling.config import TrainingConfig
from profiling.estimate.comparison import Comparison
from profiling.estimate.memory import Estimate, estimate, render_text
from profiling.estimate.record import estimate_json, estimate_record
from profiling.records import MeasurementRecord, RecordStore
from profiling.time_bound import TimeBound

ESTIMATE_HINT = "give it a longer timeout, or check the sizes given"


class EstimateRun(BaseModel):
    """What one run produced: the estimate, its saved record, and the JSON / text views; with
    a trace beside it, the trace's result, record and the comparison."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    estimate: Estimate
    record: MeasurementRecord
    payload: dict[str, Any]  # the --json output
    trace: Any = None  # profiling.trace.step.TraceResult, with --compare-trace
    trace_record: Any = None
    comparison: Comparison | None = None

    def text(self) -> str:
        """The estimate's table as plain text and the record to cite (what the tool returns)."""
        return f"{render_text(self.estimate)}\n{_cite_line(self.record)}"


def _cite_line(record: MeasurementRecord) -> str:
    return f"record: {record.id}  (cite as {record.citation()})"


def estimate_and_record(
    config: TrainingConfig, store: RecordStore, *, timeout: float | None = None
) -> EstimateRun:
    """Estimate ``config`` and save its record in ``store`` (a
    :class:`~profiling.records.RecordStore`). Raises ProfilingError on bad input, and
    :class:`~profiling.time_bound.TimedOut` past ``timeout`` seconds (a closed form takes
    milliseconds: the bound is there so that no estimate, whatever its input, runs on)."""
    with TimeBound(timeout, f"the estimate of {config.model or 'the model'}", ESTIMATE_HINT):
        est = estimate(config)
    record = estimate_record(est)
    store.save(record)
    return EstimateRun(estimate=est, record=record, payload=estimate_json(est, record.id))


__all__ = ["EstimateRun", "estimate_and_record"]
