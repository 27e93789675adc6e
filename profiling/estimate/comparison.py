"""The estimate beside the trace of the same step, as data: what
:func:`profiling.trace.report.compare` gives, ``--json`` prints under ``comparison``, and the
text and the chart render. Types only; here, below the trace wing, so an :class:`EstimateRun`
(``--compare-trace``) can hold one without importing the trace."""

from __future__ import annotations

from typing_extensions import TypedDict  # pydantic (TraceRun) needs this one on Python < 3.12


class CompareRow(TypedDict):
    """One category: the estimate's bytes, the trace's, their ratio, and why they differ."""

    category: str
    estimated_bytes: int
    traced_bytes: int
    ratio: float | None  # estimated / traced; None when nothing was traced
    why: str  # "" where they agree


class ModelStates(TypedDict):
    """Parameters, gradients and optimizer states together."""

    estimated_bytes: int
    traced_bytes: int
    ratio: float | None


class Comparison(TypedDict):
    rows: list[CompareRow]
    model_states: ModelStates
    estimated_total: int  # the estimate's peak per GPU
    traced_peak: int
    ratio: float | None
    why_total: str


__all__ = ["CompareRow", "Comparison", "ModelStates"]
