"""torchtitan's FSDP groups before July 2025 (``--titan-root-group``), in closed form: a plan
without a pipeline whose root group holds the embedding, the final norm and the output.

Until pytorch/torchtitan 83e6941 (#1094, "Improve reshard_after_forward logic") ``apply_fsdp``
wrapped each block, the last with ``reshard_after_forward=False`` ("FSDP would prefetch it
immediately"), then ``fully_shard(model)``: the embedding, norm and output were the root's
parameters (torchtitan/parallelisms/parallelize_llama.py at 9dec370, the commit of its
December 2024 performance tables). The torch of then kept the root gathered after forward
whatever it was given (``FSDPState._lazy_init``: ``post_forward_mesh_info = None`` for the
root; pytorch/pytorch torch/distributed/_composable/fsdp/_fsdp_state.py at 005da465 — torch
2.13 does so only when ``reshard_after_forward`` is left unset), and the root's
post-backward, with no forward input that needs a gradient, runs in the final callback at
backward's end. So, beside the later grouping (the embedding alone, [norm, output] kept from
its forward to its backward; ``profiling.plans.closed_form``), a rank holds:

- from forward's start, the root gathered (E + H: the embedding's and the head's elements in
  the gathered dtype), gathered at once (the all-gather result and its copy-out: twice);
- after the last block's forward, that block too (Lb) until its backward's post-backward:
  the loss's moments hold E + Lb more;
- through the blocks' backward, the root still gathered and the head's unsharded gradients
  (H in the gathered dtype), Lb freed: H + Gh − Lb more above the backward's start;
- at backward's end the root's post-backward: its gradients in the gathered dtype beside the
  reduce-scatter's input in the reduce dtype (then its output), beside every block's gradient
  shards.

The closed form takes the later grouping's moves: the loss's moments as they are plus E + Lb;
forward's start as it is (the root's all-gather result beside its copied-out parameters, then
the first block's); the blocks' other forward moments (the stage's without the loss's
transients) plus the most any of them gains; the blocks' and the head's backward moments from
the stage without its embedding (the later grouping's embedding backward, its group gathered
again and reduced at once, is no moment here) plus H·g less the head's gradient shards and
H − Lb; the root's reduction as it is. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, StageProfile, Vec, add, vec
from profiling.plans.shapes import Sizes, _shard, stage_tensors


def root_group_on(cfg: TrainingConfig, pipelined: bool) -> bool:
    """Whether the plan runs torchtitan's 2024 groups: FSDP, no pipeline (under one every
    group stays gathered all step then as now), not DeepSpeed's Ulysses."""
    return cfg.titan_root_group and cfg.fsdp and not pipelined and cfg.ulysses == 1


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def root_group_profile(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage,
    profile_of: Callable[[Stage, bool], StageProfile],
) -> StageProfile:  # fmt: skip
    """The later grouping's stage in closed form (``profile_of(stage, loss)``: with the loss's
    transients or without them) with the 2024 groups' moments (see the module)."""
    n, t = layout.shard_ranks, layout.tp
    prof, outside = profile_of(stage, True), profile_of(stage, False)
    # the blocks' and the head's backward moments, from the stage without its embedding: the
    # later grouping's embedding backward (its group gathered again and reduced at once) is
    # no moment of the root's, whose embedding gradient waits for the root's post-backward
    bare = stage.model_copy(update={"embedding": False})
    blocks, calm = (profile_of(bare, True), profile_of(bare, False)) if stage.embedding else (
        prof, outside)  # fmt: skip
    s = Sizes.of(cfg)
    g = s.gathered
    row = _shard(w.vocab // t, w.hidden, n) * n  # a vocabulary-sized group's gathered elements
    e_el = row if stage.embedding else 0
    h_el = row + _shard(w.hidden, 1, n) * n if stage.head else 0
    lb_el = sum(_shard(d, r, n) * n for d, r in stage_tensors(w, stage, 1, t)[:9])
    lb_el = lb_el if stage.layers else 0
    e, h, lb = e_el * g, h_el * g, lb_el * g
    # forward: the loss's moments hold E + Lb more; the blocks' E + H; forward's start gathers
    # E + H twice where the later grouping gathered its largest group twice (≤ 2·max(E, Lb))
    blocks_f = max(e + h, 2 * h, e + lb)
    # backward above its start (E + Lb higher): the blocks' moments H + Gh − Lb more (the
    # root and the head's gradients kept, the last block freed), the embedding's less
    blocks_b = max(0, 2 * h - lb)
    reduce_b = 4 if cfg.precision == "mixed" else g
    root = e_el + h_el
    # foreach_reduce copies the gradients into the reduce-scatter input in the reduce dtype,
    # frees them, then makes the output (torch 2.13 _fsdp_collectives.py); the embedding's
    # gradient of every row (embedding_dense_backward's, compute dtype) is still alive beside
    # the output, as in the later grouping's reduction (fsdp_moments.embedding_moment): the
    # trace files the gradients with the gradients, the rest with the temporaries
    rows = (w.vocab // t) * w.hidden * s.c if stage.embedding else 0
    copy_in = root * g >= root * reduce_b // n + rows
    reduction = root * reduce_b + (0 if copy_in else root * reduce_b // n)
    reduced = root * g if copy_in else rows
    shards = root // n * s.shard  # the root's gradient shards: not made yet
    # forward's start: the root's all-gather result (the tracker's activations) beside its
    # copied-out parameters, then the first block's the same, beside the embedding's output
    tokens = layout.microbatch_size * cfg.seq_or_default() // layout.seq_shards
    first = lb if stage.layers else 0
    start = vec(parameters=e + h + first, activations=e + h + first + tokens // t * w.hidden * s.c)
    # the head's gradients unsharded in the gathered dtype where the later grouping had its
    # shards (in the sharded dtype)
    head_shards = sum(_shard(d, r, n) for d, r in stage_tensors(w, stage, 0, t)[-2:]) * s.shard
    head_shards = head_shards if stage.head else 0
    moves = dict(prof.moves)
    for f, b in (("F0", "B0"), ("F", "B")):
        fwd, bwd, calm_f = prof.moves[f], prof.moves[b], outside.moves[f]
        held = vec(parameters=e + lb)
        peak_f = _larger(add(fwd.peak, held), add(calm_f.peak, vec(parameters=blocks_f)))
        moves[f] = Move(delta=add(fwd.delta, held), peak=_larger(peak_f, start))
        kept = moves[f].delta
        # the root's post-backward: every saved tensor and gathered group gone, the blocks'
        # gradient shards made, the root's gradients reduced (see the module)
        end = vec(parameters=-kept["parameters"], activations=-kept["activations"],
                  gradients=max(0, bwd.delta["gradients"] - shards) + reduced,
                  temporaries=reduction)  # fmt: skip
        gains = vec(parameters=h - lb, gradients=h - head_shards) if blocks_b else vec()
        peak = _larger(blocks.moves[b].peak, add(calm.moves[b].peak, gains))
        moves[b] = Move(delta=add(bwd.delta, vec(parameters=-(e + lb))), peak=_larger(peak, end))
    return prof.model_copy(update={"moves": moves})


__all__ = ["root_group_on", "root_group_profile"]
