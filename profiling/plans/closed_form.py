"""A plan estimated in closed form: each stage's actions computed, composed over the schedule.

The same step the trace runs (torchtitan's Llama 3 stage, ``profiling.plans.titan``, as
``profiling.plans.parallelize`` parallelizes it), each number a formula:

- **model states** per rank: every tensor of the stage as tensor parallelism leaves it
  (column-wise ``wq wk wv w1 w3`` and the output split on their rows, row-wise ``wo w2`` on
  their columns, the embedding on its rows, norms whole), then FSDP's shard of it over
  ``dp_shard × cp`` ranks (dim 0, padded to equal shards: FSDP2's rule). Mixed precision under
  FSDP keeps fp32 shards and gathers 16-bit copies; without FSDP the weights are 16-bit with an
  fp32 master copy in the optimizer. Summed with Adam this is the ZeRO paper's 2 + 2 + 12 bytes
  per parameter, over N ranks for ZeRO-3 (``model_states``);
- **activations** of one microbatch, per block and token of this rank (``block_activations``),
  what autograd saves in torchtitan's block on CUDA's kernels: the two fused RMSNorms' inputs and
  fp32 rstd (sequence-parallel under TP: 1/t of the tokens), the attention's and the MLP's
  inputs (gathered to the whole sequence under TP, as DTensor saves them), q and the keys and
  values repeated to every head (SDPA's inputs), its output (which ``wo`` keeps as it is: the
  fused kernels return it transposed), its fp32 logsumexp, SwiGLU's four tensors, and SDPA's
  seed and offset;
  the last stage adds the loss's fp32 log-probabilities and its logits (``head_activations``;
  without a pipeline no logits, the final norm's and the output's inputs instead);
- **the schedule** (``profiling.plans.schedule``) composes them exactly as for a trace
  (``profiling.plans.profile.compose``): 1F1B's first rank keeps ``pp`` microbatches of
  ``L/pp`` blocks in flight, Korthikanti et al.'s result (§4.2.3).

The transients inside an action (the next block's gathered weights, the loss's logits, the
backward's gradient buffers, the optimizer step's scratch) are modelled from what the trace
shows; ``tests/profiling/plans/test_closed_form.py`` holds the estimate to the trace.

No torch here.
"""

from __future__ import annotations

import functools

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig
from profiling.plans import zbv_form
from profiling.plans.accum import accumulated
from profiling.plans.always_pp import always_on, always_profile
from profiling.plans.checkpoint_form import (
    earlier_blocks,
    forward_moment,
    fresh_w2,
    head_freed,
    lowest_block,
)
from profiling.plans.compiled_form import compiled_blocks, compiled_moments, compiled_note
from profiling.plans.cpu_offload import offloaded, on_gpu
from profiling.plans.embedding_stage import embedding_alone, embedding_grad_rows
from profiling.plans.float8_form import (
    backward_transient,
    forward_transient,
    gathered_scales,
    pipelined_peaks,
    recomputed_input_cast,
    tp_styles_kept,
    unpipelined_peak,
)
from profiling.plans.float8_moments import unsharded_ffn_casts
from profiling.plans.fsdp_moments import block_moments, embedding_moment, reduction_peak
from profiling.plans.fsdp_pipelined import first_moves
from profiling.plans.head_form import forward_peak, regathered_head
from profiling.plans.kept_form import (
    block_activations,
    head_activations,
    model_states,
    op_sac_activations,
    stage_states,
)
from profiling.plans.layout import Layout, Stage, layout_of
from profiling.plans.loss_form import loss_rows, loss_transients
from profiling.plans.model import plan_workload
from profiling.plans.pipelined_backward import (
    block_casts,
    embedding_last,
    head_backward,
    pipelined_backward,
)  # fmt: skip
from profiling.plans.profile import Move, RankMemory, StageProfile, Vec, add, vec
from profiling.plans.result import COMPILED_NOTE, PlanResult, estimate_notes
from profiling.plans.ring_form import Block
from profiling.plans.ring_stage import highest_ring_rank, ring_moves
from profiling.plans.root_group import root_group_on, root_group_profile
from profiling.plans.shapes import LOSS_SCALARS, Sizes, _shard, stage_tensors
from profiling.plans.step_form import partial_momentum, step_order, step_scratch
from profiling.plans.tp_moments import tp_forward


def _stage_profile(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, ring_rank: int = 1,
    loss: bool = True,
) -> StageProfile:  # fmt: skip
    """One stage in the later FSDP groups (see :func:`stage_profile`)."""
    s, t, n = Sizes.of(cfg), layout.tp, layout.shard_ranks
    seq = cfg.seq_or_default()
    tokens = layout.microbatch_size * seq // layout.seq_shards
    local, u = seq // layout.seq_shards, layout.ulysses
    tensors = stage_tensors(w, stage, stage.layers, t)
    base, gathered = stage_states(cfg, tensors, n)
    base["optimizer"] += partial_momentum(cfg, w, stage.embedding and t > 1)
    base = {**base, "buffers": seq * w.head_dim * 8}  # RoPE's complex64 table, 2·seq rows
    base["total"] = sum(v for k, v in base.items() if k != "total")
    # the ring's merged output is contiguous where a step updated half of it (ring rank 1 from
    # cp = 3, rank 0 from cp = 2: profiling.plans.ring_form)
    ring_copy = layout.cp > 2 or (layout.cp == 2 and ring_rank == 0)
    block = plain = block_activations(w, tokens, t, s.c, local, u, ring_copy)
    if cfg.float8 == "tensorwise" and t > 1:  # torchao's Float8 TP styles
        block = plain = block + tp_styles_kept(w, tokens, t, s.c)
    recompute = 0
    # Checkpointed, a block keeps its input (and under the per-op policy the listed ops'
    # outputs); its backward recomputes the rest beside them (the input not copied) and holds
    # one gradient of the block's input beside what an uncheckpointed one holds
    x = tokens // t * w.hidden * s.c
    if cfg.checkpointing == "full":  # the residual sum in the middle is no longer alive
        block, recompute = x, block - 2 * x
    elif cfg.checkpointing == "selective-op":
        kept = op_sac_activations(w, tokens, t, s.c, local, u)
        # under TP the recomputation also remakes wo's partial sum over the whole sequence,
        # whose reduce-scatter it then takes from the cache
        block, recompute = kept, block - kept + (tokens * w.hidden * s.c if t > 1 else 0)
    # under torch.compile what the partitioner saves (profiling.plans.compiled_form)
    block, plain = compiled_blocks(cfg, w, tokens, t, s.c, local, u, block, plain, ring_copy)
    grad_in = x if recompute else 0
    pipelined = layout.pp > 1
    kept, rec, earlier = _every_n(cfg, stage, block, plain, recompute)
    acts = sum(kept)  # stage.layers · block when every block is alike
    recompute = rec[-1] if rec else recompute  # the last block's: the first backward's
    grad_in = x if recompute else 0
    head_acts = head_activations(w, tokens, t, s.c, pipelined) if stage.head else 0
    acts += head_acts
    if pipelined:  # PipelineStage keeps a stage's output for its backward (not the logits:
        # head_activations has them); a later stage's input is its receive buffer (buffers)
        acts += (0 if stage.head else x) - (0 if stage.embedding else x)
    gathered_b = gathered * s.gathered if cfg.fsdp else 0
    # Float8 (profiling.plans.float8_form): the casts' transients; under FSDP's fp8 all-gather
    # the blocks' Linears gathered at one byte per element
    fp8_ag = cfg.float8_all_gather and cfg.fsdp
    f8_f = forward_transient(w, tokens, t, fp8_ag, cfg.float8, s.c) if cfg.float8 else 0
    f8_b = backward_transient(w, tokens, t, fp8_ag, cfg.float8 or "", s.c) if cfg.float8 else 0
    linear_el = sum(_shard(d, r, n) * n for d, r in stage_tensors(w, stage, 1, t)[:7])
    if fp8_ag:
        gathered_b -= stage.layers * linear_el * (s.gathered - 1)
    # unsharded gradients, in the gathered dtype; accumulated over microbatches in fp32 (FSDP2
    # accumulates in its reduce dtype under mixed precision)
    reduce_b = 4 if cfg.fsdp and cfg.precision == "mixed" else s.gathered
    grad_b = reduce_b if pipelined else s.gathered
    # the embedding's gradient holds every row of the vocabulary (embedding_grad_rows)
    emb_rows = embedding_grad_rows(w) - w.vocab // t if stage.embedding else 0
    grads_b = (gathered + emb_rows * w.hidden) * grad_b
    # FSDP2's CPU offload: the gradient shards go to the host (plans.cpu_offload)
    sharded_grads = (0 if offloaded(cfg) else base["parameters"]) if cfg.fsdp else grads_b
    # the largest FSDP group gathered, as FSDP2 gathers it: every rank's padded shard (a block,
    # or the embedding and the output, each a group of its own in torchtitan)
    groups = [stage_tensors(w, stage, 1, t)[:9]]
    groups += [[(w.vocab // t, w.hidden)]] if stage.embedding or stage.head else []
    one_el = max(sum(_shard(d, r, n) * n for d, r in g) for g in groups)
    one_block = one_el * s.gathered if cfg.fsdp else 0
    base = on_gpu(cfg, base, one_el, n, s.shard)  # FSDP2's CPU offload (plans.cpu_offload)
    if fp8_ag and one_block == sum(_shard(d, r, n) * n for d, r in groups[0]) * s.gathered:
        one_block -= linear_el * (s.gathered - 1)
    logits = w.vocab * tokens // t
    f_loss, b_loss = (b * loss for b in loss_transients(t, s.c))
    f_rows, b_rows = (b * loss for b in loss_rows(t, tokens))
    f_extra = logits * f_loss + f_rows if stage.head else max(tokens * w.hidden * s.c // t, f8_f)
    b_extra = logits * b_loss + b_rows if stage.head else 2 * (w.ffn // t) * s.c * tokens
    # the embedding's backward: its whole-vocabulary gradient in the compute dtype beside the
    # gradient of its output (gathered to the whole sequence under sequence parallelism)
    emb_extra = (w.vocab * w.hidden + tokens * w.hidden) * s.c if stage.embedding else 0
    keep = gathered_b if pipelined else 0  # without a pipeline FSDP reshards after forward
    # ... except the final norm and the output, one group torchtitan never reshards after
    # forward (apply_fsdp: ``reshard_after_forward=False``, FSDP would prefetch it at once):
    # gathered from the head's forward until its post_backward reshards it (FSDPParamGroup.
    # post_backward, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py)
    head_keep, head_el = 0, (_shard(w.vocab // t, w.hidden, n) + _shard(w.hidden, 1, n)) * n
    if cfg.fsdp and stage.head and not pipelined and not cfg.reshard_always:  # (head_form)
        head_keep = head_el * s.gathered
    # --zero 2 (torchtitan's fsdp_reshard_after_forward "never"): each group gathered from its
    # forward to its post_backward, nothing gathered again in backward
    held = (
        gathered_b - head_keep if cfg.fsdp and not (pipelined or cfg.reshard_after_forward) else 0
    )
    regather = 0 if held else one_block
    # FSDP2's forward (_fsdp_param_group.py, wait_for_unshard): a group's all-gather result
    # stays in ``all_gather_state`` beside the parameters copied out of it until the next
    # group's copy-out, so a group's gathered bytes are held twice; under a pipeline the
    # copies stay (``keep``) and only the current result is more
    gathering = one_block if pipelined else 2 * one_block
    f0_peak = vec(parameters=keep + gathering, activations=acts, temporaries=f_extra)
    # under a pipeline: a wrapped block's forward; under TP w2's reduce-scatter, the output's
    # all-gather (tp_moments)
    wrapped = _larger(forward_moment(cfg, w, stage, kept, (tokens, t, s.c)),
                      tp_forward(cfg, w, stage, acts, head_acts, (tokens, t, s.c))
                      ) if pipelined else vec()  # fmt: skip
    f0_peak = _larger(f0_peak, add(wrapped, vec(parameters=keep + gathering)))
    # under "always", the output's forward and backward with its group gathered (head_form)
    head_f, head_b = regathered_head(cfg, w, stage, n, tokens, acts)
    if not pipelined:  # the blocks' gathering and the loss come at different moments
        f0_peak = forward_peak(sum(kept), gathering + max(held - one_block, 0),
                                max(tokens // t * w.hidden * s.c, f8_f),
                                head=vec(parameters=head_keep + held, activations=acts,
                                         temporaries=logits * _plain_loss(t, s.c) * loss
                                         + f_rows))  # fmt: skip
        f0_peak = _larger(f0_peak, head_f)  # under "always" the output's forward (head_form)
    moves = {
        "F0": Move(delta=vec(parameters=keep + head_keep + held, activations=acts), peak=f0_peak),
        "F": Move(delta=vec(activations=acts),
                  peak=_larger(vec(activations=acts, temporaries=f_extra), wrapped)),
    }  # fmt: skip
    after = grads_b if pipelined or not cfg.fsdp else sharded_grads
    # FSDP2's backward without a pipeline: the group's parameters, the next group's all-gather
    # prefetched (``_backward_prefetch``) and the previous group's reduce-scatter input, in the
    # reduce dtype, kept in ``reduce_scatter_states`` until this group's post_backward
    in_flight = regather + (one_el * reduce_b if cfg.fsdp else 0)
    block_extra = 2 * (w.ffn // t) * s.c * tokens  # a block's gradient buffers in backward
    # one block's gradients, made before an earlier wrapped block's backward (``_every_n``)
    block_grads = sum(_shard(d, r, n) * n for d, r in stage_tensors(w, stage, 1, t)[:9]) * grad_b
    if pipelined:  # the head's output and norm gradients made before its blocks' backward
        # the stage's output, which PipelineStage holds until the stage's backward is done
        out = 0 if stage.head else x
        made = (w.ffn // t + (w.vocab // t + 1) * stage.head) * w.hidden * grad_b
        bwd = functools.partial(pipelined_backward, b_extra if stage.head else block_extra,
                                block_extra, head=head_freed(stage, head_acts, logits * s.c, x),
                                emb_moment=vec(activations=out - acts, temporaries=emb_extra),
                                blocks=stage.layers > 0,
                                **block_casts(cfg, w, (tokens, t, s.c), grad_b, plain))  # fmt: skip
        fresh = functools.partial(fresh_w2, cfg, w, t, s.gathered, block_extra // 2, plain=plain)
        b_peak, b_more = bwd(recompute, grad_in, made, fresh=fresh(recompute))
        for q, again, freed in earlier:  # each earlier wrapped block's backward
            c_peak, c_more = (bwd(again - freed + extra_acts, 2 * x - extra_acts,
                                  made + q * block_grads, fresh=fresh(again))[which]
                              for which, extra_acts in ((0, 0), (1, 2 * x)))  # fmt: skip
            b_peak, b_more = _larger(c_peak, b_peak), _larger(c_more, b_more)
        b_peak = earlier_blocks(
            cfg,
            stage,
            (block_grads, x, kept, recompute),
            b_peak,
            lambda a, b, g: bwd(recompute - a, grad_in + g, made + b, handed=g)[0],
        )
        recast = recomputed_input_cast(w, tokens, t, cfg.float8 or "") if recompute else 0
        b_peak, b_more = pipelined_peaks(b_peak, b_more, f8_b, recompute, grad_in,
                                         head_freed(stage, head_acts, logits * s.c, x),
                                         recast)  # fmt: skip
        b_peak, b_more = head_backward(w, stage, (tokens, t, s.c), grad_b, (b_peak, b_more),
                                       split=layout.schedule == "zbv")  # fmt: skip
        emb_g = (emb_rows + w.vocab // t) * w.hidden * grad_b  # the embedding's gradient
        end = embedding_last(after, out - acts, (w.vocab * w.hidden * s.c, emb_extra, emb_g),
                             grad_b != s.c)  # fmt: skip
        if emb_extra and end["total"] > b_peak["total"]:
            b_peak = end
    else:  # the loss's backward comes before the blocks' and their buffers
        emb = vec(temporaries=emb_extra)
        extra = b_extra if stage.head else block_extra
        b_peak = _larger(vec(temporaries=b_extra) if stage.head else
                         _backward_extra(extra, recompute, True, grad_in), emb)  # fmt: skip
        b_peak = _larger(b_peak, head_b)
        b_more = _larger(vec(temporaries=b_extra) if stage.head else
                         _backward_extra(extra, recompute, False, grad_in), emb)  # fmt: skip
        block_b = _backward_extra(block_extra, recompute, True, grad_in)
        # the head's backward ran first: its saved tensors are freed and its group resharded
        blocks = add(block_b, vec(parameters=regather - head_keep, activations=-head_acts,
                                  temporaries=in_flight))  # fmt: skip
        b_peak = _larger(blocks, b_peak)
        made_w2 = (w.ffn // t) * w.hidden * s.gathered
        # b_more: the first block's backward, a later microbatch's highest (plans/accum.py)
        b_peak = b_more = unpipelined_peak(b_peak, blocks, f8_b, block_extra // 2, made_w2)
        # every block checkpointed without FSDP: the lowest block's backward (lowest_block)
        b_peak = lowest_block(cfg, w, stage, (tokens, t, s.c), (grad_b, block_grads),
                              (kept, recompute, head_acts, bool(earlier)), b_peak)  # fmt: skip
        # without FSDP: Float8's w2, w3 and w1 casts beside the gradients made (float8_moments)
        b_peak = _larger(b_peak, unsharded_ffn_casts(
            cfg, w, stage, (tokens, t, s.c), (kept, rec),
            (head_acts - LOSS_SCALARS * stage.head, block_grads, grad_b)))  # fmt: skip
        for q, again, freed in () if cfg.fsdp else earlier:  # FSDP: _block_moments
            c_b = add(_backward_extra(block_extra, again - freed, True, 2 * x),
                      vec(gradients=q * block_grads, activations=-head_acts))  # fmt: skip
            b_peak = _larger(c_b, b_peak)
        # FSDP2: the embedding's backward (the first stage's last) and a late block's
        emb_b = embedding_moment(cfg, w, stage, n, tokens, (head_keep, acts, held))
        b_peak = _larger(emb_b, b_peak)
        if cfg.fsdp and stage.layers > 1:
            last = block_moments(cfg, w, stage, n, kept, rec, tokens, f8_b,
                                 linear_el if fp8_ag else 0, bool(held), ring_copy)  # fmt: skip
            b_peak = _larger(add(last, vec(parameters=-head_keep, activations=-acts)), b_peak)
    # context parallelism's ring (profiling.plans.ring_form): its buffers' highest moments
    ring = Block(kept=kept, recompute=recompute, head_acts=head_acts, head_grads=0,
                 done_grads=block_grads, grad_b=grad_b, gathering=gathering,
                 one_block=one_block, head_keep=head_keep, emb_prefetch=0, head_rs=0,
                 block_rs=0, ring_rank=ring_rank,
                 sac=cfg.checkpointing == "selective-op" and not cfg.compile)  # fmt: skip
    b_peak, b_more = ring_moves(cfg, w, layout, stage, tokens, reduce_b, ring, moves,
                                (b_peak, b_more))  # fmt: skip
    fsdp = vec(parameters=regather - head_keep, activations=-head_acts, temporaries=in_flight)
    others = (vec(temporaries=b_extra if stage.head else 0), vec(temporaries=emb_extra))
    b_peak, b_more = compiled_moments(
        cfg, w, stage, (tokens, t, s.c, local, u, n), (b_peak, b_more), pipelined, fsdp,
        (grad_b, block_grads, kept[-1] if kept else 0), others,
    )  # fmt: skip
    freed = acts - 4 * (pipelined and stage.head)  # the loss: the schedule's till the step ends
    moves["B0"] = Move(
        delta=vec(parameters=-head_keep - held, gradients=after, activations=-freed), peak=b_peak
    )
    moves["B"] = Move(delta=vec(activations=-freed), peak=b_more)
    loss_b = _larger(vec(temporaries=b_extra * stage.head), head_b)
    moves["F"], moves["B"] = accumulated(moves, loss_b, pipelined)
    embedding_alone(cfg, w, layout, stage, moves, (tokens, s.c), after)  # a stage of it alone
    first_moves(cfg, w, stage, n, moves, (kept, x, linear_el * (s.gathered - 1) * fp8_ag, after,
                                          acts, logits * s.c))  # fmt: skip
    reduce = vec(parameters=-keep, gradients=sharded_grads - after)
    moves["R"] = Move(delta=reduce, peak=reduction_peak(cfg, w, stage, n) if pipelined else vec())
    # ZBV's split backward (I and W from B; under FSDP the gradients it leaves to R)
    moves.update(
        zbv_form.split_moves(cfg, w, layout, stage, moves, tokens, max(rec or [0]), ring_rank)
    )
    scratch = step_scratch(cfg, w, stage, base["parameters"] // s.shard,
                           step_order(w, stage, t, n, cfg.fsdp))  # fmt: skip
    moves["step"] = Move(delta=vec(gradients=-sharded_grads), peak=vec(temporaries=scratch))
    recv = tokens // t * w.hidden * s.c
    per_mb = vec(buffers=recv * (int(not stage.embedding) + int(not stage.head)),
                 inputs=8 * tokens * (int(stage.embedding) + int(stage.head)))  # fmt: skip
    if not pipelined:
        per_mb = vec()
        base = vec(**{k: v for k, v in base.items() if k not in ("total", "inputs")},
                   inputs=8 * tokens * 2)  # fmt: skip
    return StageProfile(
        stage=stage.index, layers=stage.layers, per_microbatch=per_mb, moves=moves,
        base=add(base, gathered_scales(cfg, w, stage.layers)),  # FSDP's fp8 all-gather's scales
        output_bytes=logits * s.c if stage.head else recv,
        input_bytes=0 if stage.embedding else recv,
    )  # fmt: skip


def stage_profile(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, ring_rank: int = 1,
    loss: bool = True,
) -> StageProfile:  # fmt: skip
    """One stage's base and actions in closed form (see the module), on ``ring_rank`` of the
    context-parallel ring (``profiling.plans.ring_form``); without ``loss``, the loss's
    transients left out (its moments: ``profiling.plans.outside_loss``); under torchtitan's
    2024 FSDP groups (``--titan-root-group``) bounded as ``profiling.plans.root_group`` says."""
    wrap = root_group_profile if root_group_on(cfg, layout.pp > 1) else None
    wrap = always_profile if always_on(cfg, layout.pp > 1) else wrap  # (always_pp)
    if wrap is None:
        return _stage_profile(cfg, w, layout, stage, ring_rank, loss)
    return wrap(cfg, w, layout, stage, lambda st, with_loss: _stage_profile(
        cfg, w, layout, st, ring_rank, loss and with_loss))  # fmt: skip


def _every_n(
    cfg: TrainingConfig, stage: Stage, block: int, plain: int, recompute: int
) -> tuple[list[int], list[int], list[tuple[int, int, int]]]:
    """What each block keeps and recomputes, first to last, and under torchtitan's every N-th
    block (``Stage.checkpointed``) each wrapped block before a last one not wrapped: (the blocks
    after it, what it recomputes, what they kept) — its backward may be the highest, after
    theirs freed what they kept and made their gradients."""
    only = stage.checkpointed(cfg.checkpoint_every) if cfg.checkpointing == "full" else None
    if not only:
        return [block] * stage.layers, [recompute] * stage.layers, []
    kept = [block if c else plain for c in only]
    rec = [recompute if c else 0 for c in only]
    if only[-1]:
        return kept, rec, []
    L = stage.layers
    return kept, rec, [(q, rec[-1 - q], sum(kept[L - q :])) for q in range(1, L) if only[-1 - q]]


def _plain_loss(t: int, c: int) -> int:
    """Bytes per local logit the loss of a step without a pipeline holds above what it keeps:
    the logits themselves (nothing keeps them, see ``head_activations``) and ``.float()``'s
    fp32 copy (none in fp32: ``.float()`` of an fp32 tensor is the tensor); under tensor
    parallelism ``loss_parallel``'s (``loss_transients``)."""
    return c + (loss_transients(t, c)[0] if t > 1 else 0 if c == 4 else 4)


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def _backward_extra(extra: int, recompute: int, first: bool, grad_in: int = 0) -> Vec:
    """A block's backward above its start: its gradient buffers (twice in the first backward
    of a step without a pipeline), with checkpointing the block recomputed beside them
    (activations: torch's tracker files what a recomputation saves as the forward would) and
    one gradient of the block's input."""
    return vec(temporaries=(2 * extra if first else extra) + grad_in, activations=recompute)


def estimate_plan(cfg: TrainingConfig, every_ring_rank: bool = False) -> PlanResult:
    """Every pipeline rank's memory in closed form; its cost does not depend on the world size
    (one profile per stage, one composition per pipeline rank). ``every_ring_rank``: each kind
    of a context-parallel ring's rank kept in ``ring_ranks`` (at cp 2 always)."""
    if cfg.checkpointing == "selective":
        raise ProfilingError(
            "a plan's closed form has no Megatron-style selective checkpointing (the "
            "attention recomputed) yet: give --checkpointing selective-op (torchtitan's), trace "
            "the plan ('journal-agent trace' with the same flags), or give full or none"
        )
    if cfg.target != "cuda":
        raise ProfilingError(
            "a plan's closed form follows CUDA's kernels: leave out --target cpu, or trace the "
            "plan ('journal-agent trace' with the same flags)"
        )
    w = plan_workload(cfg)
    if cfg.seq is None:
        cfg = cfg.model_copy(update={"seq": cfg.seq_or_default()})
    layout = layout_of(cfg, w.layers)
    # at cp 2 ring rank 0 keeps wo's copy of the merged output and rank 1 holds more at the
    # ring: each pipeline rank's higher of the two (one ring place from cp 3)
    places: dict[int, list[RankMemory]] = {}
    ranks, profiles = highest_ring_rank(
        layout, lambda r: [stage_profile(cfg, w, layout, s, r) for s in layout.stages],
        places if every_ring_rank or layout.cp == 2 else None,
    )  # fmt: skip
    notes = estimate_notes(cfg, layout)
    if cfg.compile:
        notes = [n for n in notes if not n.startswith(COMPILED_NOTE)]
        notes.append(compiled_note(cfg, w))
    return PlanResult(kind="estimated", config=cfg, layout=layout, params=w.param_count(),
                      ranks=ranks, stages=profiles, notes=notes, ring_ranks=places)  # fmt: skip


__all__ = [
    "block_activations", "embedding_grad_rows", "estimate_plan", "head_activations",
    "model_states", "op_sac_activations", "stage_profile", "stage_tensors",
]  # fmt: skip
