"""The library's front door: one call to estimate, one to trace, one to keep the record.

    from profiling import estimate_memory, render_estimate, render_trace, save_record, trace_memory

    est = estimate_memory(model="llama-7b", gpus=2, zero=2, gpu_mem=40)
    print(render_estimate(est))
    r = trace_memory(make_model, batch=8, precision="amp-bf16")  # your factory, under fake tensors
    print(render_trace(r), save_record(r, ".journal/measurements"))

torch is imported only when a trace runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiling.config import TrainingConfig
from profiling.estimate.memory import Estimate, estimate

if TYPE_CHECKING:
    from profiling.trace.step import TraceResult


def estimate_memory(**inputs: Any) -> Estimate:
    """Closed-form memory of a training step; keywords as :class:`TrainingConfig`
    (``model`` or ``params``, ``seq``, ``batch``, ``precision``, ``optimizer``, ``gpus``,
    ``zero``, ``tp``, ``lora_rank``, ``checkpointing``, ``attention``, ``gpu``, ``gpu_mem`` …).

    Raises :class:`~profiling.errors.ProfilingError` with one sentence on bad input.
    """
    return estimate(TrainingConfig.parse(style="field", **inputs))


def trace_memory(
    model: str | Callable[..., object],
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> TraceResult:
    """Trace one training step under fake tensors: exact bytes by category and module.

    ``model`` is a reference workload name (``"llama-7b"``), ``"package.module:function"``,
    or a function returning ``(module, inputs)`` (it may take ``batch`` and ``seq``); it runs
    under fake tensors, so build the model inside it. Options as :class:`TrainingConfig`
    (``batch``, ``seq``, ``precision``, ``optimizer``, ``gpus``, ``zero``, ``fsdp``,
    ``checkpointing`` …); ``module_depth`` sets the depth of the per-module table.
    """
    from profiling.trace.step import trace_step

    factory = None
    if callable(model):
        factory = model
        model = f"{getattr(model, '__module__', '?')}:{getattr(model, '__qualname__', 'factory')}"
    depth = options.pop("module_depth", 2)
    config = TrainingConfig.parse(style="field", model=model, **options)
    return trace_step(config, progress=progress, factory=factory, module_depth=depth)


def save_record(
    result: Estimate | TraceResult, directory: str | Path, gpu_mem_gb: float | None = None
) -> str:
    """Save an :class:`Estimate` or a :class:`TraceResult` as a measurement record; its id.

    journal-agent keeps records in ``<project>/.journal/measurements``; cite one as
    ``[m:<id>]``.
    """
    from profiling.estimate.record import estimate_record
    from profiling.records import RecordStore
    from profiling.trace.report import trace_record

    if isinstance(result, Estimate):
        record = estimate_record(result)
    else:
        record = trace_record(result, gpu_mem_gb)
    return RecordStore(Path(directory)).save(record)
