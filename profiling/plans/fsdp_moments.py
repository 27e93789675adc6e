"""FSDP2 without a pipeline: the backward's highest moment inside a late block's backward
(``profiling.plans.closed_form`` calls it; here so that module stays within its lines).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.compiled_form import (
    compiled_derived,
    float8_recast,
    float8_rowwise_recast,
    lse_bytes,
)
from profiling.plans.cpu_offload import offloaded
from profiling.plans.embedding_stage import embedding_grad_rows
from profiling.plans.float8_form import recompute_cast
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, add, vec
from profiling.plans.shapes import LOSS_SCALARS, Sizes, _shard, stage_tensors

# a compiled, fully checkpointed Float8 block's backward graph at its recast, per recipe
# (rowwise_with_gw_hp's graph is not read: eager's moments stand for it)
RECASTS = {"tensorwise": float8_recast, "rowwise": float8_rowwise_recast}


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def block_moments(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, kept: list[int],
    rec: list[int], tokens: int, f8_b: int = 0, fp8_el: int = 0, held: bool = False,
    ring_copy: bool = False,
) -> Vec:  # fmt: skip
    """FSDP2 without a pipeline: the backward's highest moment inside a block's backward, as
    its ``w2`` gradient is made (under Float8 also just before, as ``w2``'s casts run: ``f8_b``
    above the saved tensors; the blocks' Linears gathered in fp8: ``fp8_el`` fewer bytes per
    gathered block). At block i (the last to run is 0) the gradient
    shards of the head and of every block after i exist (fp32 under mixed precision), the
    blocks up to i still keep what they saved, block i's group is gathered with the next one
    (or the embedding's) prefetched and the previous one's reduce-scatter input (reduce dtype)
    still held. Above the backward's start before every saved tensor is freed (the caller
    subtracts them); the highest over the blocks. ``held`` (``--zero 2``: no resharding after
    forward): every group still gathered from the forward until its post_backward, the
    blocks after i resharded, nothing prefetched."""
    s, t, h = Sizes.of(cfg), cfg.tp, w.hidden
    shard = sum(_shard(d, r, n) for d, r in stage_tensors(w, stage, 1, t)[:9])
    head_rows = (_shard(h, 1, n), _shard(w.vocab // t, h, n))
    reduce_b = 4 if cfg.precision == "mixed" else s.gathered
    emb = _shard(w.vocab // t, h, n) * n * s.gathered if stage.embedding else 0
    half, x = (w.ffn // t) * s.c * tokens, tokens // t * h * s.c  # an FFN-wide buffer, an input
    block_b = shard * n * s.gathered - fp8_el * (s.gathered - 1)  # one block gathered
    made = (w.ffn // t) * h * s.c  # w2's weight gradient
    wq = (w.heads * w.head_dim // t) * h * s.gathered  # wq's, the block's last
    grad_el = sum(d * r for d, r in stage_tensors(w, stage, 1, t)[:9])
    recast = 0
    if cfg.float8 in RECASTS and cfg.checkpointing == "full" and compiled_derived(cfg, w):
        lse = lse_bytes(w, tokens, t, s.c, cfg.seq_or_default() // cfg.cp)
        recast = RECASTS[cfg.float8](w, tokens, t, s.c, lse, cfg.cp, ring_copy)
    best = vec()
    off = offloaded(cfg)  # FSDP2's CPU offload: the gradient shards go to the host
    # alike blocks: the moment is affine in i, highest at an end; every N-th: any block
    L = stage.layers
    ends = {0, 1, L - 2, L - 1} & set(range(L)) if len(set(rec)) == 1 else set(range(L))
    for i in sorted(ends):
        after = stage.layers - 1 - i
        previous = shard if after else sum(head_rows)  # the group reduced before this one
        moment = vec(
            parameters=-after * block_b if held else block_b,
            gradients=(0 if off else sum(head_rows) * s.shard + after * shard * s.shard) + made,
            activations=sum(kept[: i + 1]) + rec[i] - half,
            temporaries=3 * half + 2 * x + (0 if held else block_b if i else emb)
            + previous * n * reduce_b,
        )  # fmt: skip
        plain = moment
        if t > 1 and not cfg.float8:  # just before: w2's backward (w2_backward_moment)
            moment = _larger(moment, add(plain, w2_backward_moment(w, tokens, t, s.c)))
        if rec[i] and cfg.float8 == "tensorwise" and t > 1:  # torchao's TP styles: w2's weight
            # cast in the recomputation, above its recast in backward (its input kept in fp8)
            acts, temps = recompute_cast(w, tokens, t, s.c, cfg.float8_all_gather)
            cast = vec(gradients=-made, activations=half + acts,
                       temporaries=temps - 3 * half - 2 * x)  # fmt: skip
            moment = _larger(plain, add(plain, cast))
        elif f8_b:  # w2's casts: its input still saved, its gradient not yet made
            moment = _larger(plain, add(plain, vec(gradients=-made, activations=half,
                                                   temporaries=f8_b - 3 * half)))  # fmt: skip
        # ... and at the block's end, as its last weight gradient (wq's) is made: every other
        # one exists (the gathered dtype), the FFN's buffers are gone, the block keeps only
        # its first norm's input, rstd and the matmuls' (gathered) input, beside the gradients
        # of its input in flight (its output's, the keys' and values' paths' sum, wq's)
        end = vec(
            parameters=plain["parameters"],
            gradients=plain["gradients"] - made + grad_el * s.gathered - wq - h * s.gathered,
            activations=sum(kept[:i]) + x + tokens * h * s.c + 4 * tokens // t,
            temporaries=plain["temporaries"] - 3 * half - 2 * x + wq + 3 * tokens * h * s.c + x,
        )  # fmt: skip
        moment = _larger(moment, end)
        if not held:  # the block's own gather, as its backward starts (see _copy_out)
            held_in = block_b + previous * n * reduce_b + x  # gather output, RS input, gradient
            moment = _larger(moment, _copy_out(plain, sum(kept[: i + 1]), made, held_in))
        if recast and rec[i]:  # nothing of w2's made yet; the gradient reaching the block
            graph = vec(parameters=plain["parameters"], gradients=plain["gradients"] - made,
                        activations=sum(kept[: i + 1]),
                        temporaries=plain["temporaries"] - 3 * half - x + recast)  # fmt: skip
            moment = _larger(moment, graph)
        best = _larger(moment, best) if best["total"] else moment
    return add(best, vec(activations=LOSS_SCALARS))  # the loop holds them (LOSS_SCALARS)


def _copy_out(plain: Vec, kept: int, made: int, temporaries: int) -> Vec:
    """A block's pre-backward (FSDP2's ``FSDPParamGroup.pre_backward`` →
    ``wait_for_unshard`` → ``foreach_all_gather_copy_out``, torch 2.13 torch/distributed/fsdp/
    _fully_shard/_fsdp_param_group.py, _fsdp_collectives.py): its all-gather's output (the
    prefetch issued at the later block's pre-backward) copied out into its unsharded
    parameters, both alive, before it prefetches the block below. The later block's
    post-backward has reduced its gradients (their shards exist) and its reduce-scatter input
    (reduce dtype) is still held; every saved tensor of this block is still alive (a
    checkpointed one not yet recomputed) beside the gradient reaching it. Above ``plain``'s
    moment of the same block only where the group ``plain`` prefetches is smaller than a
    block: the first block's, which prefetches the embedding's (a wide toy, h 256 and f 4h,
    mixed FSDP 4: the trace's peak 25,440 B above the closed form's, 0.9984; D43's CP 2 plan
    −33,632 B)."""
    return vec(
        parameters=plain["parameters"], gradients=plain["gradients"] - made,
        activations=kept, temporaries=temporaries,
    )  # fmt: skip


def w2_backward_moment(w: WorkloadConfig, tokens: int, t: int, c: int) -> Vec:
    """Under tensor parallelism, ``w2``'s own backward above the moment ``block_moments``
    starts from (its weight gradient made as a gradient, the SwiGLU product freed, the
    product's two gradients made): a moment earlier, as ``mm`` has just made its input's
    gradient and its weight's (a temporary until autograd accumulates it), the product is
    still saved, and the gradient of its output is all-gathered to the whole sequence
    (row-wise ``w2``'s ``Shard(1)`` output: ``_c10d_functional.all_gather_into_tensor``, then
    ``cat``: ``tokens·h`` elements), not yet freed. Higher where the rank's FFN width is below
    the hidden size (TP 4 on Llama's 8/3·h), by ``tokens·c·(h − f/t)``; read in the trace's
    live tensors at FSDP 2 × TP 4 with full checkpointing (0.993 of it before)."""
    half, made = (w.ffn // t) * c * tokens, (w.ffn // t) * w.hidden * c
    return vec(gradients=-made, activations=half,
               temporaries=made + tokens * w.hidden * c - 2 * half)  # fmt: skip


def embedding_moment(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, tokens: int,
    freed: tuple[int, int, int],
) -> Vec:  # fmt: skip
    """FSDP2 without a pipeline, the first stage's last backward, the embedding's, above the
    backward's start (``freed``: the head's gathered group and every saved tensor, gone by
    then). Its group is gathered again for backward (the tracker files it as activations) and
    ``embedding_dense_backward`` makes the gradient of every row of the vocabulary in the
    compute dtype (``Partial`` under tensor parallelism: ``embedding_grad_rows``), beside the
    gradient of its output (gathered to the whole sequence) or, under tensor parallelism,
    FSDP2's redistribution of it to this rank's vocabulary shard
    (``_get_grad_inner_tensor``), while the first block's reduce-scatter input (reduce dtype)
    waits in ``reduce_scatter_states`` and every other group's gradient shards exist. Then
    the post-backward reshards the group and reduces: the local gradient beside the
    reduce-scatter's input and output. The higher of the two moments; none off the first
    stage or without FSDP."""
    if not (cfg.fsdp and stage.embedding):
        return vec()
    s, t, h = Sizes.of(cfg), cfg.tp, w.hidden
    shard = sum(_shard(d, r, n) for d, r in stage_tensors(w, stage, 1, t)[:9])
    reduce_b = 4 if cfg.precision == "mixed" else s.gathered
    rows = _shard(w.vocab // t, h, n) * n  # the embedding's gathered (padded) elements
    whole = w.vocab * h * s.c  # every row's gradient
    local = (w.vocab // t) * h * s.c if t > 1 else 0  # redistributed to the vocabulary shard
    grads = (_shard(h, 1, n) + _shard(w.vocab // t, h, n) + stage.layers * shard) * s.shard
    grads *= not offloaded(cfg)  # FSDP2's CPU offload: the gradient shards on the host
    # under --zero 2 (``held``: every group gathered since its forward) the embedding's group
    # is still gathered, the blocks' resharded at their post_backward: nothing gathered again
    head_keep, acts, held = freed
    gathered = rows * s.gathered
    made = vec(
        parameters=-head_keep - held + (gathered if held else 0), gradients=grads,
        activations=(0 if held else gathered) - acts,
        temporaries=whole + max(tokens * h * s.c, local) + shard * n * reduce_b,
    )  # fmt: skip
    reduced = vec(parameters=-head_keep - held, gradients=grads, activations=-acts,
                  temporaries=(local or whole) + (rows + rows // n) * reduce_b)  # fmt: skip
    return add(_larger(made, reduced), vec(activations=LOSS_SCALARS))


def reduction_peak(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, split: bool = False
) -> Vec:
    """FSDP2 under a pipeline: the gradient reduction after a step's last backward (the
    schedule's ``perform_reduce_grad``) at its highest, above its start. Each group in module
    order (the embedding, the blocks, the final norm with the output) runs its post-backward
    (``FSDPParamGroup.post_backward``, torch 2.13 torch/distributed/fsdp/_fully_shard/
    _fsdp_param_group.py; ``foreach_reduce``, _fsdp_collectives.py):

    - a parameter with a 16-bit ``.grad`` beside its fp32 accumulated one (``_grad_forms``)
      adds it there (``accumulate_unsharded_grad_if_needed``);
    - each gradient is taken for the reduction (``_get_grad_inner_tensor``, _fsdp_param.py):
      under tensor parallelism a ``Partial`` one (the norms'; the embedding's, every row of
      the vocabulary: ``embedding_grad_rows``) is redistributed first, a copy of the
      parameter's local size made beside it, then the original let go;
    - the group reshards (its parameters, gathered since the step's first forward, freed), the
      previous group's reduce-scatter input leaves ``reduce_scatter_states``, its own is made
      in the reduce dtype (the padded shards of every rank) and the gradients copied in, each
      freed as it is copied but the group's last one, which goes after the reduce-scatter's
      output (the new gradient shard) is made.

    In the trace the ``.grad`` a group's last parameter had (ZBV's 16-bit gradients, the
    last stage's head beside its fp32 one) is let go only as ``post_backward`` returns, not
    where it is set to ``None``: beside the reduce-scatter's input and output where the
    reduction takes another tensor for it (a redistributed copy; the accumulated one).
    Counted: PP 4 x CP 2 x TP 2 x FSDP 2 ZBV's middle stages 512 B below, the last stage
    (the head alone) 1,024 B over, the first stage (the embedding's copy of its vocabulary
    shard beside the whole vocabulary's fp32 gradient, 1F1B's too) 524,288 B below; PP 2 x
    TP 2 x FSDP 2 ZBV's last stage 621,056 B over (its blocks' gradients are fp32). Before
    that, 4.19 MB the closed form had as nothing on the first stage of PP 2 x FSDP 2 (8 x 256
    toy, 0.968 of the trace there). ``split``: after ZBV's weight backwards. None without
    FSDP."""
    if not cfg.fsdp:
        return vec()
    s, t, h = Sizes.of(cfg), cfg.tp, w.hidden
    reduce_b = 4 if cfg.precision == "mixed" else s.gathered
    fp8 = 1 if cfg.float8_all_gather else s.gathered  # the blocks' Linears gathered in fp8
    block = stage_tensors(w, stage, 1, t)[:9]
    # (kind, tensors, gathered bytes, the gradient's elements, Partial under TP)
    groups = [("embedding", [(w.vocab // t, h)], [s.gathered], [embedding_grad_rows(w) * h],
               [t > 1])] if stage.embedding else []  # fmt: skip
    groups += [("blocks", block, [fp8] * 7 + [s.gathered] * 2, [d * r for d, r in block],
                [False] * 7 + [t > 1] * 2)] * stage.layers  # fmt: skip
    if stage.head:
        groups.append(("head", [(h, 1), (w.vocab // t, h)], [s.gathered] * 2,
                       [h, w.vocab // t * h], [t > 1, False]))  # fmt: skip
    params = grads = temps = rs_in = 0
    best = vec()

    def moment() -> None:
        nonlocal best
        best = _larger(best, vec(parameters=params, gradients=grads, temporaries=temps))

    for kind, tensors, gathered_b, grad_el, partial in groups:
        acc, dot = _grad_forms(cfg, stage, kind, split)
        last, held, listed = len(tensors) - 1, 0, []
        for j, (el, (d, r), part) in enumerate(zip(grad_el, tensors, partial, strict=True)):
            if acc and dot:  # the 16-bit gradient added to the fp32 one
                if j == last:
                    held = el * s.gathered  # let go as post_backward returns
                else:
                    grads -= el * s.gathered
            own = el * (reduce_b if acc else s.gathered)
            if not part:  # the reduction takes the gradient itself
                listed.append(own)
                continue
            copy = d * r * (reduce_b if acc else s.gathered)
            temps += copy
            moment()
            listed.append(copy)
            if dot and not acc and j == last:
                held = own  # let go as post_backward returns
            else:
                grads -= own
        params -= sum(d * r * b for (d, r), b in zip(tensors, gathered_b, strict=True))
        temps -= rs_in  # the previous group's reduce-scatter input released
        shard = sum(_shard(d, r, n) for d, r in tensors)
        rs_in = shard * n * reduce_b
        temps += rs_in
        moment()
        grads += shard * reduce_b - (sum(listed) - listed[-1])
        moment()
        grads -= listed[-1] + held
    return best


def _grad_forms(cfg: TrainingConfig, stage: Stage, kind: str, split: bool) -> tuple[bool, bool]:
    """Whether a group's parameters reach the reduction with an fp32 accumulated gradient
    (FSDP2's ``unsharded_accumulated_grad``, mixed precision) and with a ``.grad`` of their
    own (the compute dtype's): a pipeline's backwards upcast each into the accumulated one
    (``to_accumulated_grad_if_needed``); ZBV's weight backwards leave 16-bit ones
    (``profiling.plans.zbv_form``) but on the first stage (its whole backward at W, through
    FSDP's root) and the last stage's blocks (upcast by its output's post-backward), whose
    head keeps its later ``W``'s 16-bit gradients beside its fp32 ones. Without mixed
    precision the reduce dtype is the parameters' and the ``.grad`` is the one."""
    if cfg.precision != "mixed":
        return False, True
    if not split or stage.embedding or (stage.head and kind == "blocks"):
        return True, False
    return stage.head, True


__all__ = ["block_moments", "embedding_moment", "reduction_peak"]
