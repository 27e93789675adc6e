"""Memory without the hardware: estimate and trace training steps, keep every number's provenance.

    from profiling import estimate_memory, trace_memory, render_estimate, render_trace

Light at import time: ``torch`` is imported only when a trace runs, so ``import profiling``
(and ``profiling.records`` / ``profiling.estimate.memory``) stays fast. Names are resolved lazily.
"""

from __future__ import annotations

from profiling._lazy import lazy_exports
from profiling._version import __version__

# public name -> (module, attribute); imported on first use.
_EXPORTS: dict[str, tuple[str, str]] = {
    # one call each
    "estimate_memory": ("profiling.api", "estimate_memory"),
    "trace_memory": ("profiling.api", "trace_memory"),
    "save_record": ("profiling.api", "save_record"),
    "render_estimate": ("profiling.estimate.memory", "render_text"),
    "render_trace": ("profiling.trace.report", "render_trace_text"),
    "compare": ("profiling.trace.report", "compare"),
    "render_comparison": ("profiling.trace.report", "render_compare_text"),
    "plot_estimate": ("profiling.plot", "plot_estimate"),
    "plot_trace": ("profiling.plot", "plot_trace"),
    # the models behind them
    "Estimate": ("profiling.estimate.memory", "Estimate"),
    "TrainingConfig": ("profiling.config", "TrainingConfig"),
    "EstimateInput": ("profiling.config", "TrainingConfig"),  # older name, the same class
    "TraceConfig": ("profiling.config", "TrainingConfig"),  # older name, the same class
    "OPTIMIZERS": ("profiling.config", "OPTIMIZERS"),
    "GPUS": ("profiling.gpus", "GPUS"),
    "TraceResult": ("profiling.trace.step", "TraceResult"),  # imports torch
    "trace_step": ("profiling.trace.step", "trace_step"),  # imports torch
    "WORKLOADS": ("profiling.models.workloads", "WORKLOADS"),
    "build_model": ("profiling.models.workloads", "build_model"),
    # measured: a real run on this machine's device
    "MemoryProfiler": ("profiling.measure.profiler", "MemoryProfiler"),
    "MemorySnapshot": ("profiling.measure.snapshot", "MemorySnapshot"),
    "ProfileSummary": ("profiling.measure.profiler", "ProfileSummary"),
    "gpu_info": ("profiling.measure.devices", "gpu_info"),
    # records
    "MeasurementRecord": ("profiling.records", "MeasurementRecord"),
    "Quantity": ("profiling.records", "Quantity"),
    "RecordStore": ("profiling.records", "RecordStore"),
    "Step": ("profiling.records", "Step"),
    "new_record_id": ("profiling.records", "new_record_id"),
    "ProfilingError": ("profiling.errors", "ProfilingError"),
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
