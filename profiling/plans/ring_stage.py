"""Context parallelism's ring attention inside a pipeline stage, in closed form: the ring's
highest moments among a stage's actions (``profiling.plans.ring_form`` has the ring's buffers
and the moments of a stage without a pipeline; ``profiling.plans.closed_form`` calls this).

Under a pipeline torch's ``PipelineStage`` runs each microbatch's forward and backward as an
action of its own, so the ring's moments are above the action's start: in a forward the last
block's attention, every earlier block's saved tensors of this microbatch beside it (and on the
first forward of a step under FSDP the stage's groups gathered so far, kept until the
reduction, with the current group's all-gather result); in a backward the attention of the last
block (or the first), the gradients made so far beside the ring's buffers. FSDP gathers once per
step under a pipeline, so no group is prefetched nor reduced inside a backward; a microbatch's
gradients accumulate: the first backward makes them (under FSDP each group's are upcast to the
reduce dtype at its post-backward), a later one makes each block's anew in the gathered dtype
and adds them into the accumulated ones (without FSDP autograd adds them in place).

No torch here.
"""

from __future__ import annotations

from collections.abc import Callable

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, RankMemory, StageProfile, Vec, compose
from profiling.plans.ring_form import Block, ring_peaks, with_ring
from profiling.plans.schedule import rank_actions
from profiling.plans.shapes import Sizes, _shard, stage_tensors


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def pipelined_ring(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, tokens: int, n: int, reduce_b: int,
    b: Block, moves: dict[str, Move], b_peaks: tuple[Vec, Vec],
) -> tuple[Vec, Vec]:  # fmt: skip
    """A pipeline stage's forwards (``moves["F0"]``, ``moves["F"]``, updated) and its first and
    later backward's highest moments (returned) with the ring's among theirs."""
    s, t = Sizes.of(cfg), cfg.tp
    head = stage_tensors(w, stage, 0, t)[-2:] if stage.head else []
    block_el = sum(_shard(d, r, n) * n if cfg.fsdp else d * r
                   for d, r in stage_tensors(w, stage, 1, t)[:9])  # fmt: skip
    head_el = sum(_shard(d, r, n) * n if cfg.fsdp else d * r for d, r in head)
    acc_b = reduce_b if cfg.fsdp else s.gathered  # what a block's gradients are once it is done
    # the head's saved tensors are freed by its backward but the logits, the stage's output,
    # which PipelineStage keeps until the microbatch's backward is over, and the loss
    head_acts = b.head_acts - (w.vocab * tokens // t * s.c + 8 if stage.head else 0)
    none = {"head_acts": head_acts, "one_block": 0, "head_keep": 0, "emb_prefetch": 0,
            "head_rs": 0, "block_rs": 0, "gathering": 0}  # fmt: skip
    first = b.model_copy(update={**none, "head_grads": head_el * acc_b,
                                 "done_grads": block_el * acc_b, "grad_b": s.gathered})  # fmt: skip
    later = b.model_copy(update={**none, "head_grads": 0, "done_grads": 0,
                                 "grad_b": s.gathered if cfg.fsdp else 0})  # fmt: skip
    forward, b0 = ring_peaks(w, tokens, t, s.c, cfg.cp, first)
    _, b1 = ring_peaks(w, tokens, t, s.c, cfg.cp, later)
    if not stage.embedding:  # a later stage's first block reads its receive buffer (buffers)
        forward = {**forward, "activations": forward["activations"] - tokens // t * w.hidden * s.c}
        forward["total"] = sum(v for k, v in forward.items() if k != "total")
    # the first forward: every group before the last block's gathered and kept, with the last
    # block's all-gather result
    gathered = (block_el * stage.layers + (w.vocab // t * w.hidden if stage.embedding else 0)) \
        * s.gathered + b.one_block if cfg.fsdp else 0  # fmt: skip
    f0 = {**forward, "parameters": gathered}
    f0["total"] = sum(v for k, v in f0.items() if k != "total")
    for key, peak in (("F0", f0), ("F", forward)):
        moves[key] = Move(delta=moves[key].delta, peak=_larger(peak, moves[key].peak))
    return _larger(b0, b_peaks[0]), _larger(b1, b_peaks[1])


def ring_moves(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, tokens: int,
    reduce_b: int, b: Block, moves: dict[str, Move], b_peaks: tuple[Vec, Vec],
) -> tuple[Vec, Vec]:  # fmt: skip
    """A stage's moves with the ring's moments among theirs (``moves`` updated, the first and
    later backward's highest returned): as they are without context parallelism, and on a
    stage without a block (the embedding or the head alone, as torchtitan splits few layers
    over many stages), which runs no attention and so no ring."""
    if layout.cp == 1 or not stage.layers:
        return b_peaks
    if layout.pp > 1:
        return pipelined_ring(cfg, w, stage, tokens, layout.shard_ranks, reduce_b, b, moves,
                              b_peaks)  # fmt: skip
    moves["F0"], b0 = with_ring(cfg, w, layout, stage, tokens, reduce_b, b, moves["F0"],
                                b_peaks[0])  # fmt: skip
    return b0, b_peaks[1]


def compose_ranks(layout: Layout, profiles: list[StageProfile]) -> list[RankMemory]:
    """Every pipeline rank's memory from the stages' profiles, over its schedule."""
    ranks = []
    for r, held in enumerate(layout.rank_stages):
        actions = rank_actions(layout.schedule, r, layout.pp, len(held), layout.microbatches)
        ranks.append(compose(r, layout.global_ranks(r), [profiles[i] for i in held], actions,
                             layout.microbatches, holds=layout.schedule == "1f1b",
                             keeps=layout.keeps_outputs, head=len(layout.stages) - 1))  # fmt: skip
    return ranks


def highest_ring_rank(
    layout: Layout, profiles_of: Callable[[int], list[StageProfile]],
    places: dict[int, list[RankMemory]] | None = None,
) -> tuple[list[RankMemory], list[StageProfile]]:  # fmt: skip
    """Every pipeline rank's memory on the ring's highest place, and the stages' profiles of
    the place highest overall: ring rank 1 (the ranks from 1 on hold alike, rank 0 less: see
    ``profiling.plans.ring``), except at cp 2, where rank 0 keeps wo's copy of the merged output
    (a block's queries) and rank 1 holds more at the ring's moments: each pipeline rank takes
    the higher of the two. ``profiles_of(ring_rank)`` profiles every stage on that place.
    ``places``, when given, is filled with each place's pipeline ranks (``{1: …, 0: …}``), and
    from cp 3 on rank 0 is profiled too (the comparison shows each kind of a ring rank)."""
    profiles = profiles_of(1)
    ranks = compose_ranks(layout, profiles)
    if places is not None and layout.cp > 1:
        places[1] = ranks
    if layout.cp == 1 or (layout.cp > 2 and places is None):
        return ranks, profiles
    zero = profiles_of(0)
    other = compose_ranks(layout, zero)
    if places is not None:
        places[0] = other
    if max(r.peak_bytes for r in other) > max(r.peak_bytes for r in ranks):
        profiles = zero
    return [
        b if b.peak_bytes > a.peak_bytes else a for a, b in zip(ranks, other, strict=True)
    ], profiles


__all__ = ["compose_ranks", "highest_ring_rank", "pipelined_ring", "ring_moves"]
