"""What a compiled block of a plan keeps for backward, in closed form.

torchtitan compiles each (checkpointed, tensor-parallelized) block on its own; AOTAutograd
traces its forward and backward into one joint graph and Inductor's partitioner
(``min_cut_rematerialization_partition``) chooses what the forward saves. Read from the
partitioner's own output on torchtitan's block (``profiling.trace.compiled``, fake tensors,
Llama shapes under FSDP, TP with sequence parallelism, CP, bf16/mixed/fp32, torchao's Float8
tensorwise), per block and microbatch, with ``T`` this rank's tokens, ``t`` the TP degree, ``c``
the compute dtype's bytes, ``q``/``kv`` the local heads' widths, ``f`` the local FFN width:

- **no checkpointing**: the block's input and the residual sum in the middle (each
  ``T/t·h·c``, sequence-parallel), both RMSNorms' outputs (``T·h·c`` each, gathered to the whole
  sequence under TP), q and the keys and values repeated to every head, SDPA's output, its fp32
  logsumexp and philox seed and offset, ``w1``'s and ``w3``'s outputs and SwiGLU's product
  (``3·T·f·c``). Eager autograd keeps SiLU's output and both norms' fp32 rstd besides: the
  partitioner recomputes them in backward from what it saves;
- **torchtitan's per-op policy** (``selective-op``): the input, q's and v's projections,
  SDPA's outputs, ``w1``'s output and under TP ``wo``'s reduce-scattered output; eager's cache
  also keeps ``w2``'s output and its reduce-scatter, which no backward op reads (the partitioner
  drops them);
- **full checkpointing**: the input alone, as eager;
- **around context parallelism's ring attention** (CP > 1, no checkpointing): the ring is inside
  the block's one graph (torchtitan compiles with ``fullgraph=True``), so the forward saves the
  ring's all-gathered keys and values (the backward's gather is the forward's) and their
  contiguous copies (:func:`ring_kept`), and the backward graph holds the ring's functionalized
  fp32 key/value gradients (:func:`ring_backward`);
- **Float8 tensorwise** (without TP): with no checkpointing the attention's input is not kept
  (recomputed and cast again in backward), the FFN's input is kept as its fp8 cast (one byte
  per element), SwiGLU's product is recomputed, and each Linear's fp8 weight is kept (one byte
  per local element) with the casts' fp32 scales; under the per-op policy what bf16 keeps and
  the casts' amax and scale scalars (44 bytes).

Not derived here (``None``: the eager count stands, an upper bound): Float8 under TP (torchao's
TP styles), FSDP's fp8 all-gather without checkpointing, Ulysses, the math SDPA kernel; the
per-op policy around the ring counts eager's policy with the ring's saved tensors added (an upper
bound: 1.04 of the trace on a toy). No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, add, vec
from profiling.plans.ring_form import RNG, fused
from profiling.plans.shapes import Sizes, _shard, sdpa_kv, stage_tensors

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

F8_SAC_SCALES = 10 * 2 + 6 * 4  # per-op policy + Float8: ten bf16 amaxes, six fp32 scales
F8_SCALES = 8 * 4  # no checkpointing + Float8: eight fp32 reciprocal scales


def seed_bytes(c: int) -> int:
    """SDPA's philox seed and offset as the compiled graph keeps them: the flash kernel's (2,)
    and () uint64 tensors (16-bit inputs), the memory-efficient kernel's two int64 scalars."""
    return 24 if c == 2 else 16


def compiled_kept(
    w: WorkloadConfig, tokens: int, t: int, c: int, lse: int, mode: str,
    float8: str | None = None, fp8_all_gather: bool = False, u: int = 1, ring: int = 0,
) -> int | None:  # fmt: skip
    """Bytes one compiled block keeps for ``tokens`` of this rank (see the module); ``lse``:
    its logsumexp's bytes (as ``block_activations`` pads it); ``mode``: the block's
    checkpointing (``none``, ``selective-op``, ``full``); ``ring``: what the ring attention adds
    (:func:`ring_kept`). None where not derived."""
    h = w.hidden
    q, kv, f = w.heads * w.head_dim // t, w.n_kv_heads * w.head_dim // t, w.ffn // t
    x = tokens // t * h * c  # the input, sequence-parallel under TP
    if mode == "full":
        return x
    if u > 1 or (float8 and (t > 1 or (fp8_all_gather and mode == "none"))):
        return None
    if ring and mode != "none":
        return None
    attention = q * c * tokens + lse + seed_bytes(c)  # SDPA's output, logsumexp, seed
    if mode == "selective-op":
        scattered = x if t > 1 else 0  # wo's reduce-scattered output
        kept = x + (q + kv + f) * c * tokens + attention + scattered
        return kept + (F8_SAC_SCALES if float8 else 0)
    if mode != "none":
        return None
    qkv = (q + sdpa_kv(w, t)) * c * tokens  # q and the keys and values repeated (sdpa_kv)
    if float8:
        linears = (2 * q + 2 * kv + 3 * f) * h  # the seven Linears' local weights, in fp8
        return 2 * x + qkv + attention + tokens * h + 2 * f * c * tokens + linears + F8_SCALES
    return 2 * x + 2 * tokens * h * c + qkv + attention + 3 * f * c * tokens + ring


def ring_kept(w: WorkloadConfig, tokens: int, t: int, c: int, cp: int, copy: bool) -> int:
    """What a compiled block around context parallelism's ring attention keeps beyond the same
    block without it (no checkpointing), read from the partitioner's forward graph on
    torchtitan's block (``profiling.plans.ring``): AOTAutograd traces the ring's forward and
    backward into one joint graph, where the backward's all-gather of the keys and values is
    the forward's, so the forward saves views of that gathered buffer (its whole storage:
    ``cp`` × the repeated keys and values) and the contiguous copies of this rank's keys and
    values the first step's kernel read (as large as the repeated keys and values), beside
    what the block keeps without the ring; and, where the merged output is contiguous in
    (batch, heads, tokens, dim) (``copy``: ring rank 0 at cp 2, every rank from cp 3), wo's
    copy of it. torchtitan compiles each block with ``fullgraph=True`` (pytorch/torchtitan
    9dec370, torchtitan/parallelisms/parallelize_llama.py, apply_compile): the ring is inside
    the block's one graph, never a graph break."""
    if cp == 1:
        return 0
    kv = sdpa_kv(w, t) * c * tokens
    # the seed and offset kept are a ring step's, (2,) and () uint64 in every dtype (RNG)
    seed = RNG - seed_bytes(c)
    return (1 + cp) * kv + (w.heads // t * w.head_dim * c * tokens if copy else 0) + seed


def lse_rows(seq: int, c: int) -> int:
    """The logsumexp's rows per head: fp32 runs the memory-efficient kernel, padded to 32."""
    return -(-seq // 32) * 32 if c == 4 else seq


def lse_bytes(w: WorkloadConfig, tokens: int, t: int, c: int, seq: int, u: int = 1) -> int:
    """SDPA's fp32 logsumexp for this rank's heads and ``tokens`` (``seq`` per sequence)."""
    return 4 * (w.heads // t // u) * lse_rows(seq * u, c) * (tokens // seq)


def compiled_blocks(
    cfg: TrainingConfig, w: WorkloadConfig, tokens: int, t: int, c: int, seq: int, u: int,
    block: int, plain: int, copy: bool = False,
) -> tuple[int, int]:  # fmt: skip
    """(a checkpointed block's, a plain block's) bytes kept under torch.compile; eager's where
    the partitioner's choices are not derived (an upper bound); ``copy``: the ring's merged
    output is copied for wo (:func:`ring_kept`)."""
    if not compiled_derived(cfg, w):
        return block, plain
    lse = lse_bytes(w, tokens, t, c, seq, u)
    fp8 = (cfg.float8, cfg.float8_all_gather and cfg.fsdp, u)
    ring = ring_kept(w, tokens, t, c, cfg.cp, copy)
    kept = compiled_kept(w, tokens, t, c, lse, cfg.checkpointing, *fp8, ring=ring)
    none = compiled_kept(w, tokens, t, c, lse, "none", *fp8, ring=ring)
    if kept is None and cfg.checkpointing == "selective-op":
        # the per-op policy around the ring, not derived: eager's count with what the ring's
        # compiled graph saves besides (its gathered keys and values, their copies)
        return block + ring, (plain if none is None else none)
    return (block if kept is None else kept), (plain if none is None else none)


def compiled_derived(cfg: TrainingConfig, w: WorkloadConfig) -> bool:
    """Whether a compiled plan's blocks are counted from the partitioner's choices (the fused
    SDPA kernels' graphs are the ones read; Float8 only without TP)."""
    c = 4 if cfg.precision == "fp32" else 2
    plain = not (cfg.float8 and cfg.tp > 1)
    return cfg.compile and fused(w.head_dim, c) and plain


def compiled_note(cfg: TrainingConfig, w: WorkloadConfig) -> str:
    """The closed form's note on a compiled plan: what it counts, and where eager's stands."""
    if not compiled_derived(cfg, w):
        return (
            "torch.compile: the closed form counts each block as eager, an upper bound (the "
            "partitioner keeps less: recomputes the pointwise chains); trace the plan for the "
            "compiled blocks"
        )
    f8 = (
        "; under Float8 a block's backward counted as eager's, an upper bound (tensorwise and "
        "rowwise with full checkpointing: its graph's recast too)"
        if cfg.float8
        else ""
    )
    return (
        "torch.compile: each block keeps what Inductor's partitioner saves, and its backward is "
        "its backward graph's highest moment (both in closed form, read from the partitioner's "
        f"graphs on torchtitan's block){f8}"
    )


def compiled_backward(
    w: WorkloadConfig, tokens: int, t: int, c: int, lse: int, mode: str, seq: int, cp: int = 1,
) -> int:  # fmt: skip
    """Bytes a compiled block's backward graph holds above what the block keeps, at its
    highest (read from the graph, each tensor freed after its last use, the weights' gradients
    alive until the graph returns them): the largest of three moments — SwiGLU's backward
    (``w2``'s weight gradient, the gradient of its input, SiLU's output recomputed and the
    product's gradient; under the per-op policy ``w3``'s output, the residual sum and the FFN's
    gathered input recomputed too; under full checkpointing everything the forward graph saves,
    recomputed), the rotary embedding's backward (the FFN's and ``wo``'s weight gradients, the
    residual's gradient, the keys' summed over their repeats, q's in fp32, the complex64
    gradients of q and k and a copy of the table's rows) and the attention's input gradient
    summed from ``wq``'s, ``wk``'s and ``wv``'s (every weight gradient but ``wq``'s, q's
    gradient, the residual's and three gathered input gradients); around the ring (``cp`` > 1)
    also the ring's backward beside the FFN's and wo's weight gradients and the residual's
    gradient (:func:`ring_backward`). ``seq``: the rank's sequence. The gradient reaching the
    block is not counted here."""
    h, d = w.hidden, w.head_dim
    q, kv, f = w.heads * d // t, w.n_kv_heads * d // t, w.ffn // t
    x, gathered, ft = tokens // t * h * c, tokens * h * c, f * c * tokens
    w2_grad = f * h * c
    if mode == "full":
        qkvo = (2 * q + sdpa_kv(w, t)) * c * tokens  # q, the keys and values, the output
        swiglu = 2 * gathered + qkvo + lse + seed_bytes(c) + x + 5 * ft + w2_grad
    elif mode == "selective-op":
        swiglu = x + gathered + 4 * ft + w2_grad
    else:
        swiglu = 3 * ft + w2_grad
    recomputed = gathered if mode != "none" else 0  # the attention's input, for wq, wk, wv
    ffn_wo = (q + 3 * f) * h * c + h * c  # the FFN's and wo's weight gradients, the FFN norm's
    rotary = ffn_wo + x + kv * c * tokens + 8 * q * tokens + 4 * kv * tokens + 4 * seq * d
    attention = ffn_wo + 2 * kv * h * c + x + q * c * tokens + 3 * gathered
    ring = ffn_wo + x + ring_backward(w, tokens, t, c, cp) if cp > 1 else 0
    return max(swiglu, rotary + recomputed, attention + recomputed, ring + recomputed)


def compiled_moments(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage,
    dims: tuple[int, int, int, int, int, int],
    peaks: tuple[Vec, Vec], pipelined: bool, fsdp: Vec, grads: tuple[int, int, int],
    others: tuple[Vec, Vec],
) -> tuple[Vec, Vec]:  # fmt: skip
    """A compiled stage's first and later backward at their highest (``peaks``, eager's, where
    the partitioner's choices are not derived): its blocks' backward graph
    (``compiled_form.compiled_backward``; ``dims``: tokens, t, c, the local sequence, u, the
    FSDP degree)
    beside what eager's model has for a pipeline's stage; without a pipeline, with FSDP's
    gathered group and collectives in flight (``fsdp``), the head's gradients made first and,
    without FSDP, one block's gradients made before the next block's backward (``grads``: the
    gradients' bytes per element, a block's gradients, what the last block keeps), or the
    loss's or the embedding's moment (``others``)."""
    if not compiled_derived(cfg, w) or cfg.float8:
        return peaks
    tokens, t, c, local, u, n = dims
    lse = lse_bytes(w, tokens, t, c, local, u)
    # the gradient reaching the block: under a pipeline the stage's receive buffer
    reaching = 0 if pipelined else tokens // t * w.hidden * c
    held = vec(temporaries=compiled_backward(w, tokens, t, c, lse, cfg.checkpointing, local, cfg.cp)
               + reaching)  # fmt: skip
    if pipelined:
        return _larger(peaks[0], held), _larger(peaks[1], held)
    grad_b, block_g, last = grads
    head_g = 0 if cfg.fsdp or not stage.head else (w.vocab // t + 1) * w.hidden * grad_b
    held = add(held, add(fsdp, vec(gradients=head_g)))
    if cfg.fsdp and cfg.cp == 1:  # the ring's moments: ring_form
        held = _reduced(w, stage, (t, n, Sizes.of(cfg).shard, c), grads[2], held)
    if not cfg.fsdp and stage.layers > 1:
        # block j from the top goes back beside the j blocks above's gradients, their kept
        # tensors freed: linear in j, so the second block or the lowest is the highest — the
        # lowest where a block's gradients outweigh what it keeps (full checkpointing: only its
        # input; TP 2 full checkpointing read 0.9615 counting the second alone)
        n = stage.layers - 1 if block_g > last else 1
        held = _larger(held, add(held, vec(gradients=n * block_g, activations=-n * last)))
    top = _larger(held, _larger(*others))
    if cfg.cp > 1:  # the ring's moments (profiling.plans.ring_form) among them
        return _larger(top, peaks[0]), _larger(top, peaks[1])
    return top, top


def _reduced(
    w: WorkloadConfig, stage: Stage, sizes: tuple[int, int, int, int], last: int, held: Vec
) -> Vec:
    """FSDP2 without a pipeline: each group reduce-scatters its gradients into its shard when
    its backward ends (``FSDPParamGroup.post_backward``, torch 2.13 ``_fsdp_param_group.py``;
    torchtitan shards the final norm and the output as one group, which goes back first), so
    a compiled block j from the top goes back beside the head's sharded gradients and the j
    blocks above's, what those blocks keep freed (``last``) — linear in j: the top, the second
    or the one above the lowest is the highest; the lowest prefetches the embedding's group,
    not a block's (the group before it in forward order). Left out, ``--dp-shard 2 --compile
    --checkpointing full`` read 0.985 of the trace (−123,272 B; ``--dp-shard 4`` +3,896 B,
    where a gathered group more made up for it)."""
    t, n, el, c = sizes
    head = (_shard(w.vocab // t, w.hidden, n) + _shard(w.hidden, 1, n)) * el if stage.head else 0
    blocks = stage_tensors(w, stage, 1, t)[:9]
    block = sum(_shard(d, r, n) for d, r in blocks) * el
    top = add(held, vec(gradients=head))
    lowest = stage.layers - 1
    swap = (_shard(w.vocab // t, w.hidden, n) - sum(_shard(d, r, n) for d, r in blocks)) * n * c
    out = top
    for k in {1, lowest - 1 if block > last else 1, lowest}:
        if k >= 1:
            gone = vec(gradients=k * block, activations=-k * last,
                       parameters=swap if k == lowest else 0)  # fmt: skip
            out = _larger(out, add(top, gone))
    return out


def float8_recast(
    w: WorkloadConfig, tokens: int, t: int, c: int, lse: int, cp: int, copy: bool
) -> int:  # fmt: skip
    """A compiled, fully checkpointed block's backward graph under Float8 tensorwise, at its
    highest: as the recomputed forward casts ``w2``'s input (SwiGLU's product) to fp8, its two
    fp32 copies (8 B an element; the 16-bit product freed by its upcast) beside everything the
    graph has made by then and keeps for later (read from the partitioner's backward graph on
    torchtitan's block, torchao 0.18's ``hp_tensor_to_float8_dynamic``, FSDP 2 × CP 2): the
    output gradient's fp8 cast and the product's gradient, which the graph makes first (from
    ``w2``'s fp8 weight); the attention's normed input, q as the rotary embedding leaves it,
    the keys and values as SDPA takes them (repeated to every head, or as the rotary
    embedding and ``wv`` left them) and, around the ring, their contiguous copies
    and their all-gather (:func:`ring_kept`), SDPA's output (and wo's copy of the ring's
    merged one), its logsumexp and seed; the residual
    sum and the FFN's normed input; ``w1``'s and ``w3``'s outputs and SiLU's; every Linear's
    fp8 weight but ``w2``'s (each read again by its input gradient); the casts' fp32 scales.
    The gradient reaching the
    block is not counted here. ``c`` is 2 (Float8 runs in 16 bits)."""
    h, f = w.hidden, w.ffn // t
    weights = _six_weights(w, t)  # wq wk wv wo w1 w3 in fp8
    ffn = 3 * f * c * tokens + 8 * f * tokens  # w1's, SiLU's and w3's outputs, the cast
    held = _recast_held(w, tokens, t, c, lse, cp, copy)
    return tokens * h + f * c * tokens + weights + held + ffn + F8_SCALES + 16


def float8_rowwise_recast(
    w: WorkloadConfig, tokens: int, t: int, c: int, lse: int, cp: int, copy: bool
) -> int:  # fmt: skip
    """:func:`float8_recast` under Float8 rowwise, whose backward graph peaks later: as it casts
    the gradient of ``w3``'s output to fp8 row by row, its three fp32 copies (the upcast kept
    for the column-wise cast of the weight gradient, the scaled one, the clamped one: 12 B an
    element; the 16-bit gradient freed by the upcast), its ``|x|`` (kept for the column-wise
    amax) and row scales, beside ``w1``'s output, the gradient of SiLU's output, ``w2``'s
    weight gradient (made, returned when the graph ends) and, of every Linear but ``w2``
    (each cast again column-wise by its own backward), the fp32 copy and ``|W|`` the recomputed
    forward's row-wise cast made (6 B an element, where tensorwise keeps the fp8 weight);
    the attention's and the residual's tensors as :func:`float8_recast` has them. Read from the
    partitioner's backward graph on torchtitan's block (torchao 0.18's rowwise recipe,
    ``hp_tensor_to_float8_dynamic`` with an axiswise scale rounded to a power of 2; FSDP 2 ×
    CP 2: 0.853 of the trace before, to the byte now)."""
    h, f = w.hidden, w.ffn // t
    cast = 12 * f * tokens + 4 * tokens  # three fp32 copies, the row scales
    ffn = 3 * f * c * tokens + f * h * c  # w1's output, the two gradients, |x|; w2's gradient
    return cast + ffn + 6 * _six_weights(w, t) + _recast_held(w, tokens, t, c, lse, cp, copy)


def _six_weights(w: WorkloadConfig, t: int) -> int:
    """Elements of a block's Linears but ``w2`` on one TP rank (wq wk wv wo w1 w3)."""
    q, kv = w.heads * w.head_dim // t, w.n_kv_heads * w.head_dim // t
    return (2 * q + 2 * kv + 2 * (w.ffn // t)) * w.hidden


def _recast_held(
    w: WorkloadConfig, tokens: int, t: int, c: int, lse: int, cp: int, copy: bool
) -> int:  # fmt: skip
    """What a recomputed Float8 block's backward graph holds for the attention's backward and
    the residual at its recast (:func:`float8_recast`): the attention's normed input, q as the
    rotary embedding leaves it, the keys and values as SDPA takes them, around the ring their
    copies and all-gather, SDPA's output, logsumexp and seed; the residual sum and the FFN's
    normed input."""
    h, q = w.hidden, w.heads * w.head_dim // t
    x, gathered = tokens // t * h * c, tokens * h * c
    kv_in = sdpa_kv(w, t) * c * tokens  # the keys and values as SDPA takes them
    # around the ring a step's logsumexp besides (ring rank 1 at cp 2; rank 0's is half one)
    attention = gathered + 2 * q * c * tokens + kv_in + lse * (1 + (cp > 1))
    attention += seed_bytes(c) + ring_kept(w, tokens, t, c, cp, copy)
    return attention + x + gathered


def ring_backward(w: WorkloadConfig, tokens: int, t: int, c: int, cp: int) -> int:
    """What the ring attention's backward holds inside a compiled block's backward graph at its
    highest, beside the FFN's and wo's weight gradients and the residual's gradient (read from
    the partitioner's backward graph on torchtitan's block, ring rank 1 at cp 2): the graph
    reads the forward's gathered keys and values (kept, not gathered again) and runs
    functionalized, so each in-place update of the fp32 key/value gradients the all-to-all
    brought is a fresh copy — at a step's second scatter the previous whole buffer and the new
    one (2 × the keys' and values' fp32 gradients), the value half updated and the key half
    concatenated for the next exchange (one key's fp32 gradient each), the query's fp32
    accumulator and this step's query gradient."""
    if cp == 1:
        return 0
    kv4 = sdpa_kv(w, t) * 4 * tokens  # the keys' and values' fp32 gradients
    q = w.heads // t * w.head_dim * tokens
    return 2 * kv4 + kv4 + q * 4 + q * c


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


__all__ = [
    "compiled_backward", "compiled_blocks", "compiled_derived", "compiled_kept", "compiled_moments",
    "compiled_note", "float8_recast", "float8_rowwise_recast",
    "lse_bytes", "lse_rows", "ring_backward", "ring_kept", "seed_bytes",
]  # fmt: skip
