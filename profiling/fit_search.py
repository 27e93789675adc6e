"""``fit --max-seq`` and ``fit --max-batch``: the largest sequence length or micro-batch at which
the configuration, as given, fits the GPU.

What nvidia-smi would show grows with the sequence and the micro-batch, so the largest value is
found by doubling from 1 and then bisecting, over estimates: each candidate's need is the
closed form's upper bound (what the caching allocator must keep on a GPU near full, where it
hands its cached segments back and retries before it runs out; the CUDA context's upper end),
so a value that fits by estimate fits by construction of that bound. With ``confirm`` the value
found is traced too (``profiling.fit_confirm``: its exact allocated peak under that bound, or
its allocations replayed through the caching allocator at the GPU's size where the bound does
not fit); while the trace does not fit, the search goes on below it by trace, so the answer is
one a trace confirmed. The next value up is said with its
need, so the boundary is visible.

No torch unless a value is traced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from profiling.config import MAX_BATCH, MAX_SEQ, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.estimate.render import SAFETY_MARGIN
from profiling.fit import fits_note, usable
from profiling.time_bound import TimeBound, checkpoint
from profiling.units import GB, fmt_bytes

Dimension = Literal["seq", "batch"]
_WORD = {"seq": "sequence length", "batch": "micro-batch"}


class Point(BaseModel):
    value: int
    allocated: int
    nvml: int
    traced_allocated: int | None = None
    traced_nvml: int | None = None


class Largest(BaseModel):
    base: TrainingConfig
    dimension: Dimension
    gpu_mem_bytes: int
    usable_bytes: int
    limit: int  # the most the configuration allows (the model's context, the field's bound)
    best: Point | None  # None: not even 1 fits
    above: Point | None  # the next value up, which does not fit (None at the limit)
    estimates: int
    traces: int
    notes: list[str]


def _limit(base: TrainingConfig, dim: Dimension) -> int:
    if dim == "batch":
        return MAX_BATCH
    w = base._workload()
    return w.max_seq if w is not None else MAX_SEQ


def _untraceable(base: TrainingConfig) -> list[str]:
    """What of ``base`` the trace cannot run (``trace.untraceable``; the search's values change
    only ``seq`` or ``batch``, which it never refuses)."""
    from profiling.trace.untraceable import untraceable

    return untraceable(base)


def _estimated(base: TrainingConfig, dim: Dimension, value: int) -> Point:
    est = estimate(base.model_copy(update={dim: value}))
    nvml = est.counters.must_fit() if est.counters is not None else est.per_gpu_bytes
    return Point(value=value, allocated=est.per_gpu_bytes, nvml=nvml)


def largest(
    base: TrainingConfig,
    dim: Dimension,
    confirm: bool = False,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> Largest:
    """The largest ``dim`` (``seq`` or ``batch``) at which ``base`` fits its GPU."""
    with TimeBound(timeout, f"the largest {_WORD[dim]} of {base.model or 'the model'}", ""):
        return _largest(base, dim, confirm, progress)


def _largest(
    base: TrainingConfig, dim: Dimension, confirm: bool, progress: Callable[[str], None] | None
) -> Largest:
    avail = base.gpu_mem_bytes()
    if avail is None:
        raise ProfilingError("fit needs --gpu-mem GB or --gpu NAME (the memory to fit in)")
    budget, limit = usable(avail), _limit(base, dim)
    seen: dict[int, Point] = {}

    def point(value: int) -> Point:
        checkpoint()
        if value not in seen:
            seen[value] = _estimated(base, dim, value)
        return seen[value]

    notes = [fits_note(base, avail)]
    best = _bisect(point, budget, limit)
    traces, refused = 0, None
    problems = _untraceable(base) if best is not None and confirm else []
    if problems and best is not None:  # answered as --confirm 0 does, not refused after it
        notes.append(
            f"{dim} {best.value:,} is estimated, not traced: the trace needs {problems[0]}"
        )
    elif best is not None and confirm:
        best, traces, refused = _confirmed(base, dim, best, budget, point, progress, notes)
        if best is not None and refused is None and dim == "batch":
            best, more, refused = _traced_up(base, best, budget, limit, point, progress, notes)
            traces += more
    above = point(best.value + 1) if best is not None and best.value < limit else None
    if refused is not None:  # the lowest value a trace refused: the boundary by trace
        above = refused
    if best is None:
        above = refused or point(1)
    if best is not None and best.value == limit:
        notes.append(f"{limit:,} is the most the configuration allows ({_limit_why(dim)})")
    return Largest(
        base=base, dimension=dim, gpu_mem_bytes=avail, usable_bytes=budget, limit=limit,
        best=best, above=above, estimates=len(seen), traces=traces, notes=notes,
    )  # fmt: skip


def reach(base: TrainingConfig, dim: Dimension, budget: int) -> int | None:
    """The largest ``dim`` whose reserve on a GPU near full (``Counters.held``: what the caching
    allocator must keep, ``max_memory_reserved``'s side, without the CUDA context and without
    any safety margin) stays within ``budget`` bytes; None when 1 does not. Not what ``fit``
    tells a user (``largest`` leaves room for the context and the margin): the quantity a table
    of lengths read off a reserve's line against a GPU's whole memory publishes
    (benchmarks/bench_peer.py's Unsloth rows)."""

    def point(value: int) -> Point:
        est = estimate(base.model_copy(update={dim: value}))
        kept = est.counters.held() if est.counters is not None else est.per_gpu_bytes
        return Point(value=value, allocated=est.per_gpu_bytes, nvml=kept)

    best = _bisect(point, budget, _limit(base, dim))
    return best.value if best is not None else None


def _limit_why(dim: Dimension) -> str:
    return "the model's context" if dim == "seq" else "the largest micro-batch accepted"


def _bisect(point: Callable[[int], Point], budget: int, limit: int) -> Point | None:
    """The largest value in [1, limit] whose need fits ``budget`` (the need grows with the
    value): doubling from 1, then bisecting; None when 1 does not fit."""

    def fits(value: int) -> bool:
        return point(value).nvml <= budget

    if not fits(1):
        return None
    good, step = 1, 1
    while good < limit:  # double until a value does not fit
        nxt = min(limit, good + step)
        if not fits(nxt):
            break
        good, step = nxt, step * 2
    else:
        return point(good)
    bad = min(limit, good + step)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return point(good)


def _confirmed(
    base: TrainingConfig,
    dim: Dimension,
    best: Point,
    budget: int,
    point: Callable[[int], Point],
    progress: Callable[[str], None] | None,
    notes: list[str],
) -> tuple[Point | None, int, Point | None]:
    """The estimate's value traced; while its trace does not fit, bisect below it by trace.
    Returns the largest value a trace confirmed, the traces run, and the lowest value a trace
    refused (None when the first fitted)."""
    from profiling.fit_confirm import BOUND_NOTE, confirmed

    traces = 0

    def traced(value: int) -> Point:
        nonlocal traces
        if progress:
            progress(f"tracing {dim} {value:,}")
        result = confirmed(base.model_copy(update={dim: value}), budget)
        traces += 1
        p = point(value).model_copy()
        p.traced_allocated, p.traced_nvml = result.peak_bytes, result.must_fit
        return p

    notes.append(BOUND_NOTE)
    first = traced(best.value)
    if (first.traced_nvml or 0) <= budget:
        return first, traces, None
    notes.append(
        f"{dim} {best.value:,} fits by estimate, but its trace needs "
        f"{fmt_bytes(first.traced_nvml or 0, 'GB')}: searched lower by trace"
    )
    good: Point | None = None
    refused = first
    low, high = 1, best.value  # high does not fit by trace
    while high - low > 0:
        mid = (low + high) // 2
        p = traced(mid)
        if (p.traced_nvml or 0) <= budget:
            good, low = p, mid + 1
        else:
            refused, high = p, mid
        if good is not None and high - good.value <= 1:
            break
    return good, traces, refused


# How many micro-batches above the estimate's answer are replayed at most: the closed form's need
# is a bound (QLoRA's at up to 1.16 × the replay, docs/profiling.md), so the next one or two may
# run by their own allocations
UP_TRACES = 2


def _traced_up(
    base: TrainingConfig,
    best: Point,
    budget: int,
    limit: int,
    point: Callable[[int], Point],
    progress: Callable[[str], None] | None,
    notes: list[str],
) -> tuple[Point, int, Point | None]:
    """Above a micro-batch a trace confirmed, the next ones whose bound is within
    ``REPLAY_WITHIN`` over the budget (``bound × (1 − REPLAY_WITHIN) ≤ budget``) traced too —
    their allocations replayed at the GPU's size decide (``fit_confirm.confirmed``) — up to
    ``UP_TRACES``. Returns the largest that ran, the traces, and the first that did not (None
    when the search stopped at a bound)."""
    from profiling.fit_confirm import REPLAY_WITHIN, confirmed

    good, traces = best, 0
    while traces < UP_TRACES and good.value < limit:
        nxt = point(good.value + 1)
        if nxt.nvml * (1 - REPLAY_WITHIN) > budget:
            break
        if progress:
            progress(f"tracing batch {nxt.value:,} (its bound is within {REPLAY_WITHIN:.0%})")
        result = confirmed(base.model_copy(update={"batch": nxt.value}), budget)
        traces += 1
        p = nxt.model_copy()
        p.traced_allocated, p.traced_nvml = result.peak_bytes, result.must_fit
        if result.must_fit > budget:
            return good, traces, p
        notes.append(
            f"batch {p.value:,} does not fit by estimate ({fmt_bytes(nxt.nvml, 'GB')}, a bound), "
            f"but its allocations replayed need {fmt_bytes(result.must_fit, 'GB')}: it fits"
        )
        good = p
    return good, traces, None


def render_largest(res: Largest) -> str:
    b = res.base
    lines = [
        f"Largest {_WORD[res.dimension]} that fits: {b.describe(res.dimension)}, on "
        f"{fmt_bytes(res.gpu_mem_bytes, 'GB')} ({fmt_bytes(res.usable_bytes, 'GB')} usable, "
        f"a {SAFETY_MARGIN:.0%} safety margin) — {res.estimates} estimates"
        + (f", {res.traces} traces" if res.traces else ""),
        "",
    ]
    word = res.dimension
    if res.best is None:
        need = res.above
        lines.append(
            f"Nothing fits: {word} 1 needs {fmt_bytes(need.nvml if need else 0, 'GB')} on "
            "nvidia-smi."
        )
    else:
        p = res.best
        traced = (
            f"; traced: {fmt_bytes(p.traced_allocated or 0, 'GB')} allocated, "
            f"{fmt_bytes(p.traced_nvml or 0, 'GB')} on nvidia-smi"
            if p.traced_nvml is not None
            else ""
        )
        lines.append(
            f"  {word} {p.value:,}: nvidia-smi would show {fmt_bytes(p.nvml, 'GB')} near full "
            f"({fmt_bytes(p.allocated, 'GB')} allocated){traced}"
        )
        if res.above is not None:
            a = res.above
            need = a.traced_nvml if a.traced_nvml is not None else a.nvml
            by = (
                "by trace"
                if a.traced_nvml is not None
                else f"{fmt_bytes(a.allocated, 'GB')} allocated"
            )
            shown = fmt_bytes(need, "GB")
            fits = p.traced_nvml if p.traced_nvml is not None else p.nvml
            if shown in (fmt_bytes(fits, "GB"), fmt_bytes(res.usable_bytes, "GB")):
                # two decimals would hide why it does not fit (D54): four, beside the budget
                shown = f"{need / GB:,.4f} GB, over the {res.usable_bytes / GB:,.4f} GB usable"
            lines.append(f"  {word} {a.value:,} would need {shown} ({by})")
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def lighter(base: TrainingConfig) -> str:
    """What the step of ``base`` does not use yet that holds less per GPU, for a "nothing fits"
    sentence (advice to checkpoint a step already checkpointed is no advice)."""
    ways = []
    if base.checkpointing != "full":
        ways.append("--checkpointing full")
    if not base.lora_rank:
        ways.append("LoRA or QLoRA (--lora-rank 16 --qlora)")
    elif not base.qlora:
        ways.append("--qlora")
    if base.precision in ("fp32", "mixed", "amp-bf16", "amp-fp16") and not base.lora_rank:
        ways.append("--precision bf16")
    if base.optimizer in ("adamw", "adam") and not base.lora_rank:
        ways.append("--optimizer adam8bit")
    if base.gpus == 1:
        ways.append("--gpus N --fsdp")
    elif not (base.fsdp or base.zero):
        ways.append("--fsdp")
    return ", ".join(ways) if ways else "a smaller model"


def largest_json(res: Largest) -> dict[str, Any]:
    return {
        "dimension": res.dimension,
        "largest": res.best.value if res.best is not None else None,
        "best": res.best.model_dump() if res.best is not None else None,
        "above": res.above.model_dump() if res.above is not None else None,
        "gpu_mem_bytes": res.gpu_mem_bytes,
        "usable_bytes": res.usable_bytes,
        "safety_margin": SAFETY_MARGIN,
        "limit": res.limit,
        "estimates": res.estimates,
        "traces": res.traces,
        "config": res.base.model_dump(exclude_defaults=True),
        "notes": res.notes,
    }


def largest_record(res: Largest) -> Any:
    """What it prints, as a record to cite."""
    from profiling.fit import judge_quantities
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=res.usable_bytes, unit="B"),
        *judge_quantities(res.base),
    ]
    for tag, p in (("largest", res.best), ("next", res.above)):
        if p is None:
            continue
        results += [
            Quantity(name=f"{tag} {res.dimension}", value=p.value, unit=""),
            Quantity(name=f"{tag}: allocated", value=p.allocated, unit="B"),
            Quantity(name=f"{tag}: nvidia-smi", value=p.nvml, unit="B"),
        ]
        if p.traced_nvml is not None:
            results += [
                Quantity(name=f"{tag}: traced allocated", value=p.traced_allocated or 0, unit="B"),
                Quantity(name=f"{tag}: traced nvidia-smi", value=p.traced_nvml, unit="B"),
            ]
    text = render_largest(res)
    return MeasurementRecord(
        id=new_record_id("estimated"),
        kind="estimated",
        title=text.splitlines()[0],
        device={"gpu_mem_bytes": res.gpu_mem_bytes, "gpus": res.base.gpus},
        software=software_versions(),
        config=res.base.model_dump(),
        results=results,
        notes="\n".join(res.notes),
        extra={"table": text},
    )


__all__ = [
    "Largest",
    "Point",
    "largest",
    "largest_json",
    "largest_record",
    "lighter",
    "render_largest",
]
