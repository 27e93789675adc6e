"""ZBV's split backward in closed form: a stage's input backward (``I``) and weight backward
(``W``), as torch 2.13 runs them (torch/distributed/pipelining/stage.py ``backward_one_chunk``
with ``full_backward=False`` and ``backward_weight_one_chunk``; _backward.py
``stage_backward_input`` and ``stage_backward_weight``).

- The **first stage** runs nothing at ``I`` (its input needs no gradient: ``backward_one_chunk``
  skips it) and its whole backward at ``W`` (``backward_maybe_with_nosync("full")``): ``I`` is
  empty, ``W`` is the stage's full backward.
- Any **other stage**'s ``I`` is ``autograd.grad`` of its input with ``retain_graph=True``:
  nothing it saved is freed, and a pre-hook on every node that takes a weight (each Linear's
  matmul, each RMSNorm) keeps the gradient of that node's output for ``W`` — per block the
  outputs of ``wq wk wv wo w1 w2 w3`` and of both norms; the last stage's final norm and
  output (the logits' gradient) too. The last block's ``w2`` output gradient is the one the
  stage received (already a receive buffer). Its ``detach_`` of the outputs frees the loss's
  saved tensors (the log-probabilities and the logits) only when ``I`` is over; the input's
  gradient stays on the receive buffer (``inp.grad = dinput``) until the step ends.
- ``W`` is one ``autograd.grad`` per weight (``param_groups`` in ``parameters()`` order: per
  block ``wq wk wv wo w1 w2 w3 attention_norm ffn_norm``; then the final norm and the output),
  ``retain_graph=False``: each makes its weight's gradient, lets go of its kept output gradient
  and of what its node alone saved (the attention's input after ``wv``, SwiGLU's product after
  ``w2``, the MLP's input after ``w3``, the block's input and middle residual after the
  norms); what the other nodes saved (the attention's q, k, v, output and logsumexp, SwiGLU's
  three tensors) stays until the last group lets the graph go. Under full checkpointing each of
  these ``autograd.grad`` calls is a graph task of its own, and torch/utils/checkpoint.py's
  non-reentrant ``unpack_hook`` recomputes the block for each (``frame.is_recomputed[gid]``),
  keeping every recomputed tensor whose holders are alive (``frame.recomputed[gid]``) until
  they die: nine copies of what the block's other nodes saved, per block, until the end of
  ``W`` — the ZBV step's highest moment under full checkpointing by far.

- Under **FSDP2** (stage.py ``backward_maybe_with_nosync``: no gradient sync, no resharding
  after backward; the parameters stay gathered from the first forward) ``W`` makes each
  gradient on the gathered 16-bit parameter as without FSDP, and ``perform_reduce_grad``
  reduces what the ``W``s left. But on the last stage the output's node is the root module's
  output, where FSDP's ``_pre_backward`` hook sits (_fsdp_state.py): the output's
  ``autograd.grad`` queues ``_root_post_backward_final_callback``, whose ``post_backward``
  upcasts every 16-bit gradient made so far to the reduce dtype (_fsdp_param.py
  ``to_accumulated_grad_if_needed``) or adds it there (``accumulate_unsharded_grad_if_needed``):
  at the first ``W`` the blocks' (as the output's gradient is made), at the next the final
  norm's and output's (their first gradients), each later block gradient kept until then
  (``_fsdp_kept``). The other stages' gradients stay 16-bit until the reduction.

- Under **tensor parallelism** (sequence-parallel, torchtitan's plan) each node keeps its local
  output's gradient: ``wq wk wv w1 w3``'s 1/t of the heads or FFN over the whole sequence,
  ``wo``'s and ``w2``'s partial sums over the whole sequence, the norms' 1/t of the tokens; the
  top block's ``w2`` gradient is the all-gather's output, not the receive buffer, and is let go
  with ``w2``'s group — and on a stage without its head, as without TP, SwiGLU's three tensors
  with it (each recomputation's copies too): nothing above the block keeps their nodes. A
  recomputation also holds the FFN norm's sequence-sharded output (the all-gather's input)
  until it stops (PP 4 × TP 2 on the seq-8192 toy: 1.023–1.033 of the trace before, each rank
  within 24 bytes of it now).

- Under **context parallelism** (torch's ring attention, ``ring_form``) a block keeps what it
  keeps there: the logsumexp of its own sequence chunk, and on the ring's places that update
  half the merged output (ring rank 0 at cp 2, every rank from cp 3) wo's copy of it; ``I``
  peaks in the ring's backward of the stage's first block, the last ``I`` runs
  (``_ring_input``): every output gradient kept so far but that block's ``wq wk wv`` and
  attention norm ones, wo's input gradient and the ring's buffers (``backward_moment``), and
  checkpointed what the recomputation saved for the nodes not yet run. PP 2 × CP 2 stood at
  0.9965 of the trace without checkpointing (the ring's backward not counted in ``I``). Beside
  TP the middle residual's gradient, sequence-sharded, is held too: without TP it is wo's
  output gradient, kept already; under TP that one is the all-gather's output, another tensor
  (PP 2 × CP 2 × TP 2 on the seq-8192 toy: 0.9955–0.9971 of the trace before, 2 MiB low).

- Under **Float8** (torchao's ``Float8Linear``: one autograd node per Linear,
  ``matmul_with_hp_or_float8_args``, whose backward makes the input's and the weight's
  gradients both, whichever ``autograd.grad`` asks for) ``I`` runs each node's whole backward
  — its casts (``float8_form.linear_backward``, with their fp32 scales), the weight's gradient
  made and dropped — and peaks in the stage's first block at ``w1``/``w3``, beside every output
  gradient kept so far but the attention's and the norms' (``_float8_input``); at ``W`` each
  weight's ``autograd.grad`` runs its node's whole backward again (its casts, the input's
  gradient made and dropped) above what is kept. PP 2 stood at 0.983 of the trace (``I`` and
  ``W`` without the casts): each rank now within 16 B of it, tensorwise and rowwise, with FSDP
  (fp8 all-gather too) within 140 B (FSDP's Float8 parameters, 1F1B's too). Not followed
  beside TP (torchao's Float8 TP styles) nor checkpointed: their forwards are below the trace
  in 1F1B as well (full checkpointing 245,768 B on the wide toy), and ZBV's ``W`` there stood
  at 0.991 of the trace (rank 0), beside TP 2 at 1.030 (rank 1).

- Under **compile** a block is one autograd node (AOTAutograd's compiled function): its
  parameters make one group, ``I`` runs the block's whole compiled backward (the weights'
  gradients made and dropped) and ``W`` runs it again, block by block. Not followed: the
  estimate (``I`` a whole backward) stood at 0.966–0.9985 of the trace on the wide toy (PP 2,
  with and without full checkpointing), and the eager split form at 1.012 (rank 1, its ``W``
  1.9 MB below per stage); ``result.ZBV_COMPILE_NOTE`` says so.

``tests/profiling/plans/test_zbv.py`` holds each rank to its trace. Modelled: pipelines without
sequence parallelism (Ulysses), compile or Float8 beside TP or checkpointing, with or
without FSDP, blocks not checkpointed or fully (every one, or torchtitan's every N-th), with TP
— asynchronous TP as well: its symmetric-memory workspace is outside the allocator
(``profiling.estimate.symm_mem``) and its blocks are eager ones in the trace as here, so its
split backward is TP's (PP 2 × TP 2, full checkpointing: each rank within 16 B of its trace) —
or CP, beside TP too: ``modelled``; elsewhere the estimate says to trace the plan.

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.compiled_form import lse_bytes
from profiling.plans.float8_form import block_linears, cast_scales, linear_backward
from profiling.plans.fsdp_moments import reduction_peak
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, Vec, add, vec
from profiling.plans.ring_form import backward_moment, query_bytes, sdpa_seed
from profiling.plans.ring_form import fused as fused_sdpa
from profiling.plans.shapes import Sizes, sdpa_kv, stage_tensors


def modelled(cfg: TrainingConfig) -> bool:
    """Whether ``split_moves`` follows this plan's split backward (see the module)."""
    return (
        cfg.ulysses == 1 and not cfg.compile
        and cfg.checkpointing in ("none", "full")
        # Float8 beside TP's Float8 styles or checkpointing: not followed (their forwards are
        # below the trace in 1F1B too)
        and (not cfg.float8 or (cfg.tp == 1 and cfg.checkpointing == "none"))
    )  # fmt: skip


Head = tuple[int, int, int, int]  # gradient elements, kept gradient, saved, made first


class _Block:
    """One block's tensors for the split backward, in bytes (``tokens`` of this rank)."""

    def __init__(
        self, w: WorkloadConfig, stage: Stage, tokens: int, c: int, seq: int, t: int = 1,
        ring_copy: bool = False,
    ) -> None:  # fmt: skip
        h, f, hd = w.hidden, w.ffn // t, w.head_dim
        q, kv = w.heads * hd // t, w.n_kv_heads * hd // t
        self.x = tokens // t * h * c  # sequence-parallel under TP
        full = tokens * h * c  # gathered to the whole sequence, or wo's and w2's partial sums
        # the output gradients each weight's node keeps (wq wk wv wo w1 w2 w3 and both norms)
        self.kept_grads = [q * tokens * c, kv * tokens * c, kv * tokens * c, full,
                           f * tokens * c, full, f * tokens * c, self.x, self.x]  # fmt: skip
        self.grad_el = [d * r for d, r in stage_tensors(w, stage, 1, t)[:9]]
        # what the nodes without a weight saved: SDPA's q, keys and values, output, logsumexp,
        # seed and offset (sdpa_seed); SiLU's input, the product's two factors
        sdpa = (2 * q + sdpa_kv(w, t)) * tokens * c + lse_bytes(w, tokens, t, c, seq)
        self.f = f * tokens * c
        self.others = sdpa + sdpa_seed(hd, c) + 3 * self.f
        # wo's copy of the math kernel's output, or of the ring's merged one (ring_form)
        copy = 0 if fused_sdpa(hd, c) and not ring_copy else q * tokens * c
        rstd = 4 * tokens // t
        # what a weight's node alone saved, freed after the group that runs it (by its index):
        # the attention's input (wq wk wv), wo's copy, SwiGLU's product (w2), the MLP's input
        # (w1 w3), the block's input (recomputed: only the rstd) and the middle residual
        self.own = {2: full, 3: copy, 5: f * tokens * c, 6: full, 7: rstd, 8: self.x + rstd}
        self.input_at = 7  # the attention norm frees the block's input (not recomputed)
        # under TP a recomputation also holds the FFN norm's sequence-sharded output, the
        # all-gather's input, until it stops (the trace: one x above alive_from(0))
        self.stop_extra = self.x if t > 1 else 0
        self.casts = [0] * 9  # Float8: what each weight's node holds above its kept tensors

    def alive_from(self, k: int) -> int:
        """What a recomputation at group ``k`` keeps: every holder not yet run. It runs to
        the block's last saved tensor (``w2``'s input: ``_StopRecomputationError`` once every
        holder's is made), and until then its own graph — reachable from the forward's
        locals — holds everything the block saves (``alive_from(0)``): what no holder takes
        is freed only when it stops."""
        return self.others + sum(b for j, b in self.own.items() if j >= k)


def _weight_peak(
    blocks: list[_Block], grad_b: int, first: bool, wrapped: list[bool], head: list[Head],
    received: int, at_head: int = 0, open_top: bool = False,
) -> int:  # fmt: skip
    """``W``'s highest moment above its start (see the module): per weight its gradient made,
    its kept output gradient and what its node alone saved let go; checkpointed (``wrapped``:
    which blocks are), the block recomputed for each weight first; then the final norm's and
    the output's (``head``); ``received``: the kept gradient that is a receive buffer;
    ``at_head``: what FSDP's upcast adds as the head's gradients are made."""
    level = peak = prev = 0
    last = len(blocks) - 1
    for i, (b, ckpt) in enumerate(zip(blocks, wrapped, strict=True)):
        mlp = 3 * b.f  # SwiGLU's three tensors, saved by its nodes without a weight
        for k in range(9):
            # the top block of a stage without its head: nothing above keeps its SwiGLU's
            # nodes once w2's group let its node go, so they go with what they saved
            gone = i == last and open_top and k > 5
            if ckpt:  # the recomputation stops at its last save (w2's input), its graph whole
                peak = max(peak, level + b.alive_from(0) + b.stop_extra + prev)
                level += b.alive_from(k) - (mlp if gone else 0)
            # a Float8 Linear's node runs its whole backward for its weight: the casts, the
            # input's gradient (let go as the node returns) beside what it keeps
            peak = max(peak, level + prev + b.casts[k])
            dw = b.grad_el[k] * grad_b + (b.x if k > 6 else 0)  # a norm's: its x̂ · g first
            # a later microbatch's gradient is added to the weight's and freed once the next
            # group's replaces it (``dweights``)
            peak = max(peak, level + dw + prev)
            dw -= b.x if k > 6 else 0
            level += dw if first else 0
            prev = 0 if first else dw
            level -= b.kept_grads[k] if not (i == last and k == 5 and received) else 0
            copies = k + 1 if ckpt else 1  # one per recomputation since the block's first
            level -= copies * b.own.get(k, 0)
            if k == b.input_at and not ckpt and i > 0:  # block 0's input is the receive buffer
                level -= b.x
            if i == last and open_top and k == 5:
                level -= copies * mlp
    for grad_el, kept, saved, made in head:
        dw = grad_el * grad_b
        peak = max(peak, level + dw + prev + made + at_head)
        level += (dw if first else 0) - kept - saved
        prev = 0 if first else dw
    return peak


def split_moves(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, moves: dict[str, Move],
    tokens: int, recompute: int, ring_rank: int = 1,
) -> dict[str, Move]:  # fmt: skip
    """The stage's ``I0 I W0 W`` from its full backward's ``B0 B`` (see the module);
    ``recompute``: what a checkpointed block's recomputation saves (none without; the most
    of any block's under every N-th)."""
    none = Move(delta=vec(), peak=vec())
    if layout.pp == 1 or layout.schedule != "zbv" or not modelled(cfg):
        # no split backward; or one not followed (its notes say to trace it): I a whole backward
        return {"I0": moves["B0"], "I": moves["B"], "W0": none, "W": none}
    if stage.embedding:  # nothing at I, the whole backward at W
        return {"I0": none, "I": none, "W0": moves["B0"], "W": moves["B"]}
    s = Sizes.of(cfg)
    c, seq = s.c, cfg.seq_or_default()
    ckpt = cfg.checkpointing == "full"
    t = cfg.tp
    # under CP a rank's own sequence chunk, and the ring's merged output copied for wo where a
    # step updated half of it (as closed_form's block_activations)
    ring_copy = cfg.cp > 2 or (cfg.cp == 2 and ring_rank == 0)
    block = _Block(w, stage, tokens, c, seq // layout.seq_shards, t, ring_copy)
    if cfg.float8:
        block.casts = _float8_casts(cfg, w, tokens)
    blocks = [block] * stage.layers
    # torchtitan's every N-th block (Stage.checkpointed), or every block alike
    wrapped = (stage.checkpointed(cfg.checkpoint_every) if ckpt else None) or [ckpt] * len(blocks)
    # the top block's w2 gradient is the receive buffer (under TP the all-gather's output)
    received = 0 if stage.head or t > 1 else block.x
    kept = stage.layers * sum(block.kept_grads) - received
    head: list[Head] = []
    loss = 0
    if stage.head:  # the final norm (its input, rstd) and the output (the normed input)
        logits = w.vocab // t * tokens
        # on a stage of the head alone the norm's input is the receive buffer: not let go
        norm_in = block.x if stage.layers else 0
        head = [
            (w.hidden, block.x, norm_in + 4 * tokens // t, block.x),
            (w.vocab // t * w.hidden, logits * c, tokens * w.hidden * c, 0),
        ]
        kept += block.x + logits * c
        # the loss's log-probabilities and the logits, freed when I detaches the loss
        loss = (4 + c) * logits + 4
    x_in = block.x  # the input's gradient, on the receive buffer until the step ends
    i_delta = vec(temporaries=kept + x_in, activations=-loss)
    # I at its highest: its end with the loss's tensors not yet freed and the first block's
    # backward under way — its recomputation and two hidden-sized buffers (the traces: 2 on the
    # wide toy, 1.75 at seq 8192); the last stage's loss backward may be higher (B's moment)
    # (under TP, 3 whole-sequence ones less the block's own: 2.5 at TP 2 on the wide toy)
    full = tokens * w.hidden * c
    top = recompute + 3 * full - block.x - (full - block.x) * (t == 1) if stage.layers else 0
    i_peak = add(i_delta, vec(activations=loss, temporaries=top))
    if cfg.float8 and stage.layers:  # a Float8 Linear's casts in the last block I runs
        f8 = vec(temporaries=_float8_input(block, kept) + x_in + recompute)  # the loss kept
        i_peak = f8 if f8["total"] > i_peak["total"] else i_peak
    if cfg.cp > 1 and stage.layers:  # the ring's backward in the last block I runs
        ring = _ring_input(cfg, w, block, (stage.layers, tokens, c), kept,
                           recompute, ring_rank)  # fmt: skip
        i_peak = ring if ring["total"] > i_peak["total"] else i_peak
    if stage.head and moves["B"].peak["total"] > i_peak["total"]:
        i_peak = moves["B"].peak
    if stage.head and t == 1:  # stage_backward_input's list keeps the loss's seed until it
        # returns (torch 2.13 distributed/pipelining/_backward.py: ones_like), where backward's
        # engine frees it once read: ZBV's last rank was 4 B below its trace (loss_rows has it
        # under TP: loss_parallel holds the loss's gradient)
        i_peak = add(i_peak, vec(activations=4))
    out = {"I0": Move(delta=i_delta, peak=i_peak), "I": Move(delta=i_delta, peak=i_peak)}
    # under FSDP (see the module): what the first W and each later one leave above the 16-bit
    # gradients (the last stage's upcasts), and those gradients
    kept_w = _fsdp_kept(cfg, w, stage) if cfg.fsdp else (0, 0, 0)
    for name, first in (("W0", True), ("W", False)):
        full = moves["B0" if first else "B"].delta
        delta = add(add(full, i_delta, -1), vec(temporaries=x_in))
        grad_b = s.gathered
        more = kept_w[0] if first else kept_w[1]
        # the upcast comes as the output's gradient is made; at a later W every block's
        # gradient is kept until then (none to add to: the first W upcast them)
        top = not stage.head
        high = _weight_peak(blocks, grad_b, first, wrapped, head, received, more, top)
        if not first and more:
            high = max(high, _weight_peak(blocks, grad_b, True, wrapped, head, received, 0, top))
        if first and cfg.fsdp:  # the gradients W leaves: FSDP's unsharded ones, 16-bit
            delta = add(delta, vec(gradients=kept_w[2] - full["gradients"]))
        delta = add(delta, vec(gradients=more))
        out[name] = Move(delta=delta, peak=vec(temporaries=high))
    if cfg.fsdp:  # R reduces what the Ws left, not B0's fp32 gradients
        r = moves["R"]
        left = sum(kept_w) - moves["B0"].delta["gradients"]
        peak = reduction_peak(cfg, w, stage, layout.shard_ranks, split=True)
        out["R"] = Move(delta=add(r.delta, vec(gradients=-left)), peak=peak)
    return out


def _ring_input(
    cfg: TrainingConfig, w: WorkloadConfig, b: _Block, dims: tuple[int, int, int], kept: int,
    recompute: int, ring_rank: int,
) -> Vec:  # fmt: skip
    """``I``'s highest moment under context parallelism, above its start: the ring's backward
    (``ring_form.backward_moment``) in the stage's first block, the last ``I`` runs, beside
    every output gradient kept so far (``kept``: the stage's, the last block's wq wk wv and
    attention norm ones not yet made) and the gradient of the attention's output (wo's input
    gradient, Q); checkpointed, what the block's recomputation saved for the nodes not yet run
    (each recomputed tensor is let go once its node unpacked it): SDPA's tensors, the attention's
    input, the first norm's rstd. ``dims``: (blocks, tokens, c)."""
    _, tokens, c = dims
    g = b.kept_grads
    made = kept - (g[0] + g[1] + g[2] + g[7])
    q = query_bytes(w, tokens, cfg.tp, c)
    ring = backward_moment(w, tokens, cfg.tp, c, cfg.cp, ring_rank)
    again = b.others - 3 * b.f + b.own[2] + b.own[7] if recompute else 0
    # under TP the middle residual's gradient, sequence-sharded, waits in the block input's
    # gradient buffer for the attention's: without TP it is wo's output gradient, kept already
    residual = b.x if cfg.tp > 1 else 0
    return vec(temporaries=made + q + ring + again + residual)


def _float8_input(b: _Block, kept: int) -> int:
    """``I``'s highest moment in the stage's first block (the last ``I`` runs) under Float8,
    above its start: each Float8 node's whole backward (``float8_form``: its casts; the weight's
    gradient made and dropped, ``autograd.grad`` not asking for it) beside the output gradients
    kept so far: ``kept`` less the block's not yet made, in the backward's order (w2; w3 and w1
    with SwiGLU's; wo with the FFN norm's; wv wk wq)."""
    g = b.kept_grads
    unmade = [(5, [0, 1, 2, 3, 4, 6, 7, 8]), (6, [0, 1, 2, 3, 7, 8]), (4, [0, 1, 2, 3, 7, 8]),
              (3, [0, 1, 2, 7]), (2, [0, 1, 7]), (1, [0, 7]), (0, [7])]  # fmt: skip
    return max(kept - sum(g[j] for j in later) + b.casts[k] for k, later in unmade)


def _float8_casts(cfg: TrainingConfig, w: WorkloadConfig, tokens: int) -> list[int]:
    """Each weight's Float8 node at its highest, above what it keeps (``float8_form``), in
    ``parameters()`` order (wq wk wv wo w1 w2 w3; the norms none)."""
    lin = block_linears(w, cfg.tp)  # wq wk wv wo w1 w3 w2
    ag = cfg.float8_all_gather and cfg.fsdp
    recipe = cfg.float8 or ""
    out = [linear_backward(tokens * i, i * o, tokens * o, ag, recipe,
                           cast_scales(tokens, i, o, recipe, ag))
           for i, o in (lin[j] for j in (0, 1, 2, 3, 4, 6, 5))]  # fmt: skip
    return [*out, 0, 0]


def _fsdp_kept(cfg: TrainingConfig, w: WorkloadConfig, stage: Stage) -> tuple[int, int, int]:
    """FSDP2 under the split backward: what the first W leaves above the stage's 16-bit
    gradients (the blocks' upcast), what each later W leaves (the final norm's and output's
    upcast beside their new gradients), and those gradients (see the module); nothing above
    them off the last stage or where the reduce dtype is the parameters' (no upcast)."""
    s = Sizes.of(cfg)
    g = s.gathered
    reduce_b = 4 if cfg.precision == "mixed" else g
    tensors = stage_tensors(w, stage, stage.layers, cfg.tp)
    grads = sum(d * r for d, r in tensors) * g
    if not stage.head or reduce_b == g:
        return 0, 0, grads
    head_el = w.hidden + w.vocab // cfg.tp * w.hidden
    blocks_el = sum(d * r for d, r in tensors) - head_el
    return blocks_el * (reduce_b - g), head_el * reduce_b, grads


__all__ = ["modelled", "split_moves"]
