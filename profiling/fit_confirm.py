"""What a traced candidate of ``fit`` (and ``fit --max-seq/--max-batch``) needs on nvidia-smi,
at the least cost that stays safe.

The allocated peak comes from the trace, exact, and block-scaled where the model allows it (a
few blocks traced and extrapolated, ``profiling.trace.scaling``); the caching allocator's need
on a GPU near full (what it cannot hand back and retry without) is then the closed form's bound
over that exact peak (``profiling.estimate.reserve.need_bound``: checked at or above the least
memory every replay of benchmarks/bench_reserve.py's grid runs in). Where that bound does not
fit, or fits with less than ``REPLAY_WITHIN`` of the budget to spare, the allocator is replayed
over every block (``--counter nvml``: 1.1–6× the scaled trace's time since 5d071d2, which found
no rule from a few blocks that bounds the replay's own reserve) and decides, so a candidate is
never dropped on a bound alone, nor called "fits" on less than the trace's exact peak, nor on
a bound the replay of its own allocations contradicts near the GPU's size.

Torch is imported (by the trace) only when a candidate is traced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

How = Literal["bound", "replay"]

# How close to the budget the closed form's bound may come before the replay decides. The bound
# is not a proof: on llama-7b QLoRA r16 bf16, 6 × 512, bnb's dequantized 16-bit weights
# (86 MiB each) are freed and carved by the 64.5 MiB activations after them, 21.5 MiB rests that
# no later request of the next block's fits, so its allocator needs 20.24 GB near full where the
# bound said 18.31 (0.905; D61: fit said "batch 6 fits" on 20 GB, the replay ran out at its
# 18.48 GB). A bound within 1 / 0.905 − 1 = 10.5 % of the budget may not fit by the replay: 15 %.
REPLAY_WITHIN = 0.15

BOUND_NOTE = (
    "traced: the allocated peak of the step traced under fake tensors, exact, and the caching "
    "allocator's need near full bounded in closed form over it; the allocations replayed "
    f"through the allocator over every block where that bound is within {REPLAY_WITHIN:.0%} of "
    "the usable memory or over it, which then decides"
)


class Confirmed(BaseModel):
    """A traced candidate: its exact allocated peak and what nvidia-smi needs near full."""

    peak_bytes: int  # the trace's allocated peak (its tensors)
    must_fit: int  # nvidia-smi near full, less a paged optimizer's movable state
    how: How  # "bound": closed form over the traced peak; "replay": every block replayed


def bounded(cfg: TrainingConfig) -> Confirmed:
    """The trace's exact allocated peak (block-scaled where the model allows), with the closed
    form's counters over it: what must fit is that peak's need bound + the context + NCCL.
    Where block scaling misses (its fit does not hold past its samples) the trace runs every
    block after all: its allocations are then replayed instead, at no second trace."""
    from profiling.estimate.counters import closed_form, tensors_alive
    from profiling.estimate.shape import shape_of
    from profiling.trace.step import trace_step

    result = trace_step(cfg.model_copy(update={"counter": "allocated"}), replay_on_miss=True)
    if result.counters is not None:  # scaling missed: every block traced, and replayed
        return Confirmed(peak_bytes=result.peak_bytes, must_fit=result.counters.must_fit(),
                         how="replay")  # fmt: skip
    counters = closed_form(
        cfg, result.peak_bytes, tensors_alive(cfg, shape_of(cfg)), result.paged_bytes
    )
    return Confirmed(peak_bytes=result.peak_bytes, must_fit=counters.must_fit(), how="bound")


def replayed(cfg: TrainingConfig) -> Confirmed:
    """Every block traced and its allocations replayed through the caching allocator at the
    GPU's size (the least memory the step runs in)."""
    from profiling.trace.step import trace_step

    result = trace_step(cfg.model_copy(update={"counter": "nvml"}))
    counters = result.counters
    must = counters.must_fit() if counters is not None else result.peak_bytes
    return Confirmed(peak_bytes=result.peak_bytes, must_fit=must, how="replay")


def confirmed(cfg: TrainingConfig, budget: int) -> Confirmed:
    """What ``cfg`` needs by trace, against ``budget`` bytes: the closed form's bound over the
    exact traced peak where it fits with ``REPLAY_WITHIN`` of the budget to spare; else the
    every-block replay, which decides."""
    first = bounded(cfg)
    if first.must_fit <= budget * (1 - REPLAY_WITHIN) or first.how == "replay":
        return first
    return replayed(cfg)


__all__ = ["BOUND_NOTE", "REPLAY_WITHIN", "Confirmed", "bounded", "confirmed", "replayed"]
