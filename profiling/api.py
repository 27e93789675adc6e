"""The library's front door: one call to estimate, one to trace, one to keep the record.

    from profiling import estimate_memory, render_estimate, render_trace, save_record, trace_memory

    est = estimate_memory(model="llama-7b", gpus=2, zero=2, gpu_mem_gb=40)
    print(render_estimate(est))
    r = trace_memory(make_model, batch=8, dtype="bf16")  # your factory, under fake tensors
    print(render_trace(r), save_record(r, ".journal/measurements"))

torch is imported only when a trace runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiling.estimate import Estimate, EstimateInput, estimate

if TYPE_CHECKING:
    from profiling.trace import TraceResult


def estimate_memory(**inputs: Any) -> Estimate:
    """Closed-form memory of a training step; keywords as :class:`EstimateInput`
    (``model`` or ``params``, ``seq``, ``batch``, ``precision``, ``optimizer``, ``gpus``,
    ``zero``, ``tp``, ``lora_rank``, ``recompute``, ``flash_attention``, ``gpu_mem_gb`` …).

    Raises :class:`~profiling.errors.ProfilingError` with one sentence on bad input.
    """
    return estimate(EstimateInput.parse(**inputs))


def trace_memory(
    model: str | Callable[..., Any],
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> TraceResult:
    """Trace one training step under fake tensors: exact bytes by category and module.

    ``model`` is a reference workload name (``"llama-7b"``), ``"package.module:function"``,
    or a function returning ``(module, inputs)`` (it may take ``batch`` and ``seq``); it runs
    under fake tensors, so build the model inside it. Options as :class:`TraceConfig`
    (``batch``, ``seq``, ``dtype``, ``param_dtype``, ``optimizer``, ``world_size``, ``fsdp``,
    ``checkpointing`` …).
    """
    from pydantic import ValidationError

    from profiling.errors import ProfilingError
    from profiling.trace import TraceConfig, trace_step

    factory = None
    if callable(model):
        factory = model
        model = f"{getattr(model, '__module__', '?')}:{getattr(model, '__qualname__', 'factory')}"
    try:
        config = TraceConfig(model=model, **options)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ProfilingError("; ".join(problems)) from None
    return trace_step(config, progress=progress, factory=factory)


def save_record(result: Any, directory: str | Path, gpu_mem_gb: float | None = None) -> str:
    """Save an :class:`Estimate` or a :class:`TraceResult` as a measurement record; its id.

    journal-agent keeps records in ``<project>/.journal/measurements``; cite one as
    ``[m:<id>]``.
    """
    from profiling.records import RecordStore
    from profiling.report import estimate_record, trace_record

    if isinstance(result, Estimate):
        record = estimate_record(result)
    else:
        record = trace_record(result, gpu_mem_gb)
    return RecordStore(Path(directory)).save(record)
