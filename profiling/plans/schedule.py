"""The order in which each pipeline rank runs its stages' work, as torch's schedules run it.

An action is (stage, kind, microbatch): ``F`` forward, ``B`` full backward, ``I`` backward for
the inputs only and ``W`` for the weights (the zero-bubble split), and ``R`` the gradient
reduction of a stage after its last backward (``REDUCE_GRAD``: FSDP reduce-scatters and
reshards there). The orders are those of ``torch.distributed.pipelining.schedules``:

- 1F1B (``Schedule1F1B._step_microbatches``): ``min(M, pp − r)`` forwards, then one backward
  and one forward until the forwards are done, then the remaining backwards;
- interleaved 1F1B (``ScheduleInterleaved1F1B._calculate_single_rank_operations`` with
  ``_get_warmup_ops`` and ``_get_1f1b_rank_ops``);
- ZBV (``ScheduleZBVZeroBubble._calculate_single_rank_operations``).

A port, so an estimate needs no torch; ``tests/profiling/plans/test_schedule.py`` holds each to
torch's own order for many shapes. No torch here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Literal, NamedTuple

Kind = Literal["F", "B", "I", "W", "R"]


class Action(NamedTuple):
    stage: int
    kind: Kind
    microbatch: int  # -1 for R


def one_f_one_b(rank: int, pp: int, m: int) -> list[Action]:
    """Schedule1F1B on pipeline rank ``rank`` (its one stage is ``rank``)."""
    warmup = min(m, pp - rank)
    out = [Action(rank, "F", i) for i in range(warmup)]
    f, b = warmup, 0
    while True:
        out.append(Action(rank, "B", b))
        b += 1
        if f == m:
            break
        out.append(Action(rank, "F", f))
        f += 1
    out += [Action(rank, "B", i) for i in range(b, m)]
    return [*out, Action(rank, "R", -1)]


def _warmup_ops(rank: int, stages: int, per_round: int, pp: int, m: int) -> int:
    last = (stages - 1) * per_round
    return min(last + 2 * ((pp - 1) - rank), m * stages)


def _looped(
    stages: int,
    warmup: int,
    fwd_bwd: int,
    cooldown: int,
    forward_stage: Callable[[int], int],
    backward_stage: Callable[[int], int],
) -> list[Action]:
    """``_get_1f1b_rank_ops`` without zero bubble: forwards, then F/B pairs, then backwards."""
    fwd: dict[int, int] = defaultdict(int)
    bwd: dict[int, int] = defaultdict(int)
    out: list[Action] = []

    def take(counter: dict[int, int], stage: int) -> int:
        index = counter[stage]
        counter[stage] += 1
        return index

    for op in range(warmup + fwd_bwd + cooldown):
        if op < warmup + fwd_bwd:
            stage = forward_stage(op)
            out.append(Action(stage, "F", take(fwd, stage)))
        if op >= warmup:
            stage = backward_stage(op)
            out.append(Action(stage, "B", take(bwd, stage)))
    return out


def interleaved(rank: int, pp: int, stages_per_rank: int, m: int) -> list[Action]:
    """ScheduleInterleaved1F1B on pipeline rank ``rank``."""
    v = stages_per_rank
    rounds = max(1, m // pp)
    per_round = m // rounds
    warmup = _warmup_ops(rank, v, per_round, pp, m)
    total = v * m
    fwd_bwd = total - warmup
    cooldown = total - fwd_bwd

    def forward_stage(step: int) -> int:
        return ((step // per_round) % v) * pp + rank

    def backward_stage(step: int) -> int:
        return (v - 1 - ((step - warmup) // per_round) % v) * pp + rank

    return _with_reduce(_looped(v, warmup, fwd_bwd, cooldown, forward_stage, backward_stage), m)


def zbv(rank: int, pp: int, m: int) -> list[Action]:
    """ScheduleZBVZeroBubble on pipeline rank ``rank`` (stages ``rank`` and 2·pp − 1 − rank)."""
    n = max(2 * pp - 1, m)
    s0, s1 = rank, 2 * pp - 1 - rank
    out: list[Action] = []
    f0 = f1 = b0 = b1 = 0
    for _ in range(2 * (pp - rank) - 1):
        out.append(Action(s0, "F", f0))
        f0 += 1
    for _ in range(rank):
        out += [Action(s1, "F", f1), Action(s0, "F", f0)]
        f1 += 1
        f0 += 1
    for _ in range(pp - rank):
        out += [Action(s1, "F", f1), Action(s1, "I", b1), Action(s1, "W", b1)]
        f1 += 1
        b1 += 1
    while f1 < f0 or f0 < n:
        if f0 < n:
            out.append(Action(s0, "F", f0))
            f0 += 1
        out += [Action(s0, "I", b0), Action(s0, "W", b0)]
        b0 += 1
        out += [Action(s1, "F", f1), Action(s1, "I", b1), Action(s1, "W", b1)]
        f1 += 1
        b1 += 1
    w0, w1 = b0, b1
    for _ in range(rank):
        out += [Action(s0, "I", b0), Action(s1, "I", b1)]
        b0 += 1
        b1 += 1
    for _ in range(pp - rank):
        out += [Action(s0, "I", b0), Action(s0, "W", w0)]
        b0 += 1
        w0 += 1
    out += [Action(s1, "W", i) for i in range(w1, b1)]
    out += [Action(s0, "W", i) for i in range(w0, b0)]
    return _with_reduce([a for a in out if a.microbatch < m], m)


def _with_reduce(actions: list[Action], m: int) -> list[Action]:
    """``_add_reduce_grad``: each stage's reduction right after its m-th B or W."""
    done: dict[int, int] = defaultdict(int)
    out: list[Action] = []
    for a in actions:
        out.append(a)
        if a.kind in ("B", "W"):
            done[a.stage] += 1
            if done[a.stage] == m:
                out.append(Action(a.stage, "R", -1))
    return out


def rank_actions(schedule: str, rank: int, pp: int, stages_per_rank: int, m: int) -> list[Action]:
    """What pipeline rank ``rank`` runs in one step, in order (without pipeline parallelism:
    a forward and a backward per microbatch accumulated, then the reduction)."""
    if pp == 1:
        steps = [Action(0, kind, i) for i in range(m) for kind in ("F", "B")]
        return [*steps, Action(0, "R", -1)]
    if schedule == "1f1b":
        return one_f_one_b(rank, pp, m)
    if schedule == "interleaved":
        return interleaved(rank, pp, stages_per_rank, m)
    if schedule == "zbv":
        return zbv(rank, pp, m)
    raise ValueError(f"unknown pipeline schedule {schedule!r}")


def regathers(schedule: str, pp: int, stages_per_rank: int, m: int) -> float:
    """Under --reshard-always (``profiling.plans.always_pp``): how many times a stage gathers
    its groups per step, the most over the pipeline ranks (a rank's stages averaged) — each
    forward or backward that finds them sharded (a forward reshards them, a backward keeps
    them, the reduction reshards). 1F1B: ``m + 1`` on every rank (its warm-up forwards, then
    each backward after a forward)."""
    most = 0.0
    for rank in range(pp):
        actions = rank_actions(schedule, rank, pp, stages_per_rank, m)
        held: set[int] = set()
        count = 0
        for a in actions:
            count += a.kind in ("F", "B") and a.stage not in held
            (held.add if a.kind == "B" else held.discard)(a.stage)
        most = max(most, count / len({a.stage for a in actions}))
    return most


__all__ = ["Action", "interleaved", "one_f_one_b", "rank_actions", "regathers", "zbv"]
