"""Context parallelism's ring attention in closed form (``profiling.plans.ring`` traces it).

Per attention call of one rank, with ``Q`` the bytes of its local queries (its tokens × its
heads × head dim, in the compute dtype), ``Q4`` the same in fp32 and ``L`` its fp32 logsumexp,
what torch's ``_templated_ring_attention`` holds (torch 2.13's
``torch/distributed/tensor/experimental/_context_parallel/_attention.py``, the all-gather
rotation and the head-tail load balancer, a rank of the ring other than 0):

- **kept** for backward: what the kernel keeps for the local attention (q, k, v, the output,
  the logsumexp: as without context parallelism), but the output is the merger's, contiguous
  in (batch, heads, tokens, dim): torchtitan's ``out.transpose(1, 2).contiguous()`` before
  ``wo`` copies it (``Q`` more per block; the fused kernels' own output is already laid out
  (batch, tokens, heads, dim) and copies nothing).
- **forward**, above q, k and v: the keys' and values' contiguous copies (2Q), their
  concatenation (2Q) and its all-gather (2·cp·Q, held through the ring), the kernels' outputs
  and the fp32 merger. The highest moment is a merge of a step whose keys are the first half of
  another rank's chunk: the all-gather, the step's output (Q) and its fp32 copy (Q4, none in
  fp32), the merged output (Q4), ``out - block_out`` and the product with the sigmoid (2·Q4),
  three logsumexp-sized tensors (3L); or, with three ranks or more, the second step's
  concatenation while the first step's copies, output and merged state live
  ((2·cp + 5)·Q, Q4 more in 16 bits, and L).
- **backward**, above its start: fp32 accumulators for the query's, keys' and values'
  gradients (3·Q4), the contiguous copies and the concatenation again (4Q), the all-gather again
  (2·cp·Q), the kernel's three gradients (3Q), and the keys' and values' fp32 gradients
  concatenated (2·Q4) and sent round by an all-to-all (2·Q4); with three ranks or more the
  second step's concatenation (2Q) comes on top: ``(2·cp + 9)·Q + 7·Q4``; with two, the first
  step's exchange (``(2·cp + 7)·Q + 7·Q4``) or the second's (``(2·cp + 4)·Q + 9·Q4``).

Every term is in tokens × heads × head dim, so it scales with the sequence exactly. No torch.
"""

from __future__ import annotations

from pydantic import BaseModel

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, Vec, vec
from profiling.plans.shapes import LOSS_SCALARS, Sizes, _shard, stage_tensors

SDPA_SEED = 16  # the memory-efficient kernel's philox seed and offset: two int64 scalars
LSE_ROWS = 32  # the memory-efficient kernel's logsumexp rows come in multiples of 32 queries
RNG = 24  # flash attention's seed and offset as the ring's step returns them: (2,) and ()


def sdpa_seed(head_dim: int, c: int) -> int:
    """SDPA's philox seed and offset one causal attention call keeps for backward, as the
    kernel CUDA picks (``profiling.trace.target.sdpa_backend``) returns them: the flash kernel's
    (2,) and () uint64 tensors (24 B: 16-bit inputs, head dim ≤ 256), the memory-efficient
    kernel's two int64 scalars (16 B), none from the math kernel (torch 2.13
    torch/_meta_registrations.py, meta__scaled_dot_product_flash_attention and
    meta__scaled_dot_product_efficient_attention)."""
    if c == 2 and head_dim <= 256:
        return RNG
    return SDPA_SEED if fused(head_dim, c) else 0


def ring_problem(cfg: TrainingConfig, w: WorkloadConfig) -> str | None:
    """One sentence saying why ``cfg``'s context parallelism cannot run, or None (the
    sequence's 2·cp chunks are the configuration's check)."""
    c = 4 if cfg.precision == "fp32" and not cfg.autocast else 2
    if not fused(w.head_dim, c):
        return (
            f"{w.name}'s head dimension {w.head_dim} runs CUDA's math attention, which torch's "
            "ring attention does not take (flash, memory-efficient and cuDNN attention only): "
            "estimate without --cp"
        )
    chunk = cfg.seq_or_default() // (2 * cfg.cp)  # the head-tail load balancer's 2·cp chunks
    if not (c == 2 and w.head_dim <= 256) and chunk % LSE_ROWS:
        # The memory-efficient kernel pads its logsumexp to a multiple of 32 queries (torch
        # 2.13 meta__scaled_dot_product_efficient_attention: ceil(M / 32) · 32, as the CUDA
        # kernel's kAlignLSE), and torch's ring merger (_SDPAMerger._merge_one) subtracts a
        # half-chunk's padded logsumexp from its own unpadded half: a broadcast error on CUDA.
        return (
            f"context parallelism on {'fp32' if c == 4 else f'head dimension {w.head_dim}'} "
            f"runs CUDA's memory-efficient attention, whose logsumexp torch's ring attention "
            f"cannot merge on chunks of {chunk} tokens (--seq / (2 · --cp)): give --seq a "
            f"multiple of {2 * cfg.cp * LSE_ROWS}" + (" or a 16-bit precision" if c == 4 else "")
        )
    return None


def fused(head_dim: int, c: int) -> bool:
    """Whether CUDA's SDPA runs flash or memory-efficient attention (not the math one) on a
    plan's causal attention (``profiling.trace.target.sdpa_backend``'s rules)."""
    if c == 2 and head_dim <= 256:
        return True
    return head_dim % (8 if c == 2 else 4) == 0


def query_bytes(w: WorkloadConfig, tokens: int, t: int, c: int) -> int:
    """Q: this rank's queries (``tokens`` of it, 1/t of the heads) in the compute dtype."""
    return w.heads // t * w.head_dim * tokens * c


def forward_moment(w: WorkloadConfig, tokens: int, t: int, c: int, cp: int, rank: int = 1) -> int:
    """The ring's forward at its highest, above q, k and v (see the module); ``rank`` 0 at
    cp 2: :func:`first_rank_moments`."""
    q = query_bytes(w, tokens, t, c)
    q4 = q * 4 // c
    lse = w.heads // t * tokens * 4
    wide = q4 if c == 2 else 0  # the step's fp32 copy of its output
    if rank == 0 and cp == 2:
        return first_rank_moments(q, q4, lse, c)[0]
    merge = 2 * cp * q + q + 3 * q4 + wide + 3 * lse
    second = (2 * cp + 5) * q + wide + lse if cp >= 3 else 0
    return max(merge, second) + (RNG if c == 2 else SDPA_SEED)  # the step's seed and offset


def backward_moment(w: WorkloadConfig, tokens: int, t: int, c: int, cp: int, rank: int = 1) -> int:
    """The ring's backward at its highest, above its start (see the module); ``rank`` 0 at
    cp 2: :func:`first_rank_moments`."""
    q = query_bytes(w, tokens, t, c)
    q4 = q * 4 // c
    if rank == 0 and cp == 2:
        return first_rank_moments(q, q4, w.heads // t * tokens * 4, c)[1]
    if cp >= 3:
        return (2 * cp + 9) * q + 7 * q4
    return max((2 * cp + 7) * q + 7 * q4, (2 * cp + 4) * q + 9 * q4)


def first_rank_moments(q: int, q4: int, lse: int, c: int) -> tuple[int, int]:
    """Ring rank 0 at cp 2: (the forward's highest above q, k and v; the backward's above its
    start), as torch's tracker counts them (``tests/profiling/plans/test_ring.py``, four shapes
    in bf16 and fp32). From its second step rank 0 attends with half its queries: its forward
    peaks at the all-gather (``(2·cp + 4)·Q``: the keys' and values' copies, their
    concatenation and its gather) or at that half step's merge (``2·cp·Q + 1.5·Q + 2·Q4`` and,
    in 16 bits, the half output's fp32 copy ``Q4/2``, with two logsumexps); its backward holds
    half a query's buffer and half a logsumexp more than rank 1's first exchange. Its merged
    output is contiguous in (batch, heads, tokens, dim), so wo copies it: ``Q`` more kept per
    block than ring rank 1 at cp 2, which makes rank 0 the higher over enough blocks."""
    cp = 2
    seed = RNG if c == 2 else SDPA_SEED
    half = 2 * cp * q + q + q // 2 + (q4 // 2 if c == 2 else 0) + 2 * q4 + 2 * lse + seed
    forward = max(half, (2 * cp + 4) * q)
    return forward, (2 * cp + 7) * q + q // 2 + 7 * q4 + lse // 2


class Block(BaseModel):
    """What ``stage_profile`` knows of a stage's step that the ring's moments need (bytes)."""

    kept: list[int]  # each block's saved tensors, first to last
    recompute: int  # what a checkpointed block's backward recomputes (0 without)
    head_acts: int  # the head's saved tensors (0 on a stage without it)
    head_grads: int  # the head's gradients when the blocks' backward starts
    done_grads: int  # one block's gradients once its backward is done (FSDP: reduced)
    grad_b: int  # bytes per element of a gradient as the backward makes it
    gathering: int  # FSDP: a block's parameters gathered in forward (held twice), else 0
    one_block: int  # FSDP: one block gathered, else 0
    emb_prefetch: int  # FSDP: the embedding's group gathered (the first stage), else 0
    head_rs: int  # FSDP: the head group's reduce-scatter input (reduce dtype), else 0
    block_rs: int  # FSDP: a block's reduce-scatter input, else 0
    head_keep: int  # FSDP: the head's group kept gathered from forward to its backward
    ring_rank: int = 1  # the place on the ring (0 differs at cp 2: first_rank_moments)
    # torchtitan's per-op policy (eager): the listed ops' outputs ``kept`` holds are not among
    # what ``recompute`` remakes (a wrapped block's are, beyond its input)
    sac: bool = False


def _attention_saved(
    w: WorkloadConfig, tokens: int, t: int, c: int, cp: int, rank: int
) -> tuple[int, int]:
    """(what a block holds as its attention starts: its first norm's input and rstd, the
    attention's input, q and the repeated keys and values, the keys and values before the
    repeat; what its second half keeps: the second norm's input and rstd, the MLP's input,
    SwiGLU's four tensors and wo's copy of the output)."""
    h, f, q = w.hidden, w.ffn // t, query_bytes(w, tokens, t, c)
    norm = (h * c + 4) * tokens // t
    inp = h * c * tokens
    kv = w.n_kv_heads // t * w.head_dim * c * tokens if w.n_kv_heads != w.heads else 0
    copy = q if cp > 2 or rank == 0 else 0  # wo's copy (see block_activations)
    return norm + inp + 3 * q + 2 * kv, norm + inp + 4 * f * c * tokens + copy


def ring_peaks(
    w: WorkloadConfig, tokens: int, t: int, c: int, cp: int, b: Block
) -> tuple[Vec, Vec]:
    """A stage without a pipeline: (the forward, the backward) at the ring's highest moment,
    above the step's start and the backward's start: the last block's attention in forward
    (every earlier block's saved tensors, this one's so far); in backward the attention of the
    last block, the first or the one next to either (see the loop), its second half
    freed and its gradients made, the gradient of its output and of the block's output beside
    the ring's buffers."""
    before, second = _attention_saved(w, tokens, t, c, cp, b.ring_rank)
    x = tokens // t * w.hidden * c
    L = len(b.kept)
    norm = (w.hidden * c + 4) * tokens // t
    # checkpointed, the block keeps its input only; the rest is alive, not saved
    held = before if not b.recompute else before - norm + b.kept[-1]
    held += x if t > 1 else 0  # under TP the trace holds a sequence-sharded hidden state more
    ring_f = forward_moment(w, tokens, t, c, cp, b.ring_rank)
    forward = vec(parameters=b.gathering, activations=sum(b.kept[:-1]) + held + ring_f)
    q = query_bytes(w, tokens, t, c)
    h = w.hidden
    # wo's, the MLP's and the second norm's gradients: made before the attention's backward
    mlp_grads = ((w.heads * w.head_dim + 3 * w.ffn) // t * h + h) * b.grad_b
    # checkpointed, the trace shows the merged output once more in the recomputed block (and
    # SDPA's seed and offset)
    again = q + sdpa_seed(w.head_dim, c) if b.recompute else 0
    best = vec()
    # affine in the block between the ends, not at them: the first block prefetches the
    # embedding's group (the rest a block's) and the last holds the head's reduce-scatter input
    # (the rest a block's), so the second and the second-to-last are candidates too — in fp32
    # block 1's moment (a block prefetched, one fewer block's gradient shards, block 0's input
    # still kept) is above block 0's where a block's group is larger than the embedding's
    ends = {0, 1, L - 2, L - 1} & set(range(L)) if len(set(b.kept)) == 1 else set(range(L))
    for i in sorted(ends):
        after = L - 1 - i  # blocks whose backward is done
        # FSDP2: the next group prefetched, the previous one's reduce-scatter input held
        in_flight = (b.one_block if i else b.emb_prefetch) + (b.block_rs if after else b.head_rs)
        moment = vec(
            parameters=b.one_block - b.head_keep,
            gradients=b.head_grads + after * b.done_grads + mlp_grads,
            activations=-b.head_acts - sum(b.kept[i + 1 :]) - second + b.recompute
            - (b.kept[i] - x if b.recompute and not b.sac else 0) + again,
            temporaries=backward_moment(w, tokens, t, c, cp, b.ring_rank) + q + x + in_flight,
        )  # fmt: skip
        best = moment if moment["total"] > best["total"] else best
    return forward, best


def plan_ring_peaks(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, tokens: int, n: int, reduce_b: int,
    b: Block,
) -> tuple[Vec, Vec]:  # fmt: skip
    """:func:`ring_peaks` for a stage of ``cfg``'s plan without a pipeline, ``b`` as
    ``stage_profile`` has it; here the head's gradients and FSDP2's buffers in flight
    (``fsdp_moments.block_moments``'s: the next group prefetched, the previous one's
    reduce-scatter input) and the reduced blocks' gradients."""
    s, t, h = Sizes.of(cfg), cfg.tp, w.hidden
    head = stage_tensors(w, stage, 0, t) if stage.head else []
    shard = sum(_shard(d, r, n) for d, r in stage_tensors(w, stage, 1, t)[:9])
    if cfg.fsdp:
        head_el = sum(_shard(d, r, n) for d, r in head[-2:])
        b = b.model_copy(update={
            "head_grads": head_el * s.shard, "done_grads": shard * s.shard,
            "emb_prefetch": _shard(w.vocab // t, h, n) * n * s.gathered if stage.embedding else 0,
            "head_rs": (head_el if stage.head else shard) * n * reduce_b,
            "block_rs": shard * n * reduce_b,
        })  # fmt: skip
    else:
        b = b.model_copy(update={"head_grads": sum(d * r for d, r in head[-2:]) * b.grad_b,
                                 "gathering": 0, "one_block": 0})  # fmt: skip
    # the head's saved tensors freed but the loss's scalars, which the loop holds (LOSS_SCALARS)
    b = b.model_copy(update={"head_acts": b.head_acts - LOSS_SCALARS})
    return ring_peaks(w, tokens, t, s.c, cfg.cp, b)


def with_ring(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, tokens: int,
    reduce_b: int, b: Block, f0: Move, b_peak: Vec,
) -> tuple[Move, Vec]:  # fmt: skip
    """A stage's first forward and its backward's highest moment with the ring's moments
    among theirs (as they are without context parallelism or with a pipeline)."""
    if layout.cp == 1 or layout.pp > 1:
        return f0, b_peak
    f_ring, b_ring = plan_ring_peaks(cfg, w, stage, tokens, layout.shard_ranks, reduce_b, b)
    f_peak = f_ring if f_ring["total"] > f0.peak["total"] else f0.peak
    return Move(delta=f0.delta, peak=f_peak), b_ring if b_ring["total"] > b_peak[
        "total"
    ] else b_peak


__all__ = [
    "Block", "backward_moment", "first_rank_moments", "forward_moment", "fused",
    "plan_ring_peaks", "query_bytes", "ring_peaks", "ring_problem", "with_ring",
]  # fmt: skip
