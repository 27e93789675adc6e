"""Float8 training in closed form: what torchao's ``Float8Linear`` adds to a plan's block.

Read from torchao 0.18 (``profiling.plans.float8`` has the sources) and held to its trace of one
linear, op by op (``tests/profiling/plans/test_float8.py``):

- **kept for backward**: nothing more than an ``nn.Linear`` keeps — the high-precision input
  and weight (``matmul_with_hp_or_float8_args`` saves ``input_hp, weight_hp_t``), so a plan's
  activations do not change; the backward casts again;
- **a cast** of a bf16 tensor of N elements (``hp_tensor_to_float8_dynamic``): ``|x|`` for the
  amax, then ``x.to(float32) * scale`` (4N, its fp32 copy freed after the product), ``clamp``
  (4N) and ``.to(float8)`` (N) while the scaled copy is still held: **9N bytes** at its
  highest, N kept (the fp8 copy) until the matmul;
- **the forward** of a linear of input X, weight W and output G elements: the input's cast
  (9X), then the weight's beside the fp8 input (X + 9W) — none when FSDP gathered the weight in
  fp8 already;
- **the backward**: the output gradient's cast (9G); the weight's beside it (G + 9W); the
  gradient's second cast for the weight gradient beside the fp8 gradient, weight and the input
  gradient (G + W + 2X + 9G); the input's cast (2G + W + 2X + 9X). ``rowwise_with_gw_hp`` runs
  the weight gradient's matmul in bf16: no second casts;
- **scales**: tensorwise one fp32 scalar per cast; rowwise one per row (4 B each) — counted
  with the cast;
- **FSDP's fp8 all-gather** (``float8_all_gather``): the converted weights gathered at one byte
  per element instead of two.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.models.config import WorkloadConfig
from profiling.plans.profile import Vec, add, vec

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def block_linears(w: WorkloadConfig, t: int) -> list[tuple[int, int]]:
    """(in, out) features of a block's Linears on one TP rank: wq wk wv wo w1 w3 w2."""
    h, f = w.hidden, w.ffn
    q, kv = w.heads * w.head_dim, w.n_kv_heads * w.head_dim
    return [(h, q // t), (h, kv // t), (h, kv // t), (q // t, h), (h, f // t), (h, f // t),
            (f // t, h)]  # fmt: skip


def gathered_scales(cfg: TrainingConfig, w: WorkloadConfig, layers: int) -> Vec:
    """What a stage keeps all step under FSDP's fp8 all-gather beyond its shards: each converted
    weight's gathered fp32 scale (4 B). torchao's ``WeightWithDynamicFloat8CastTensor.
    fsdp_post_all_gather`` (float8/fsdp_utils.py, torchao 0.18) makes the unsharded parameter a
    ``Float8TrainingTensor(data, scale, …)`` and hands FSDP ``(data,)`` alone as the inner
    tensors it frees on reshard (torch 2.13 ``_fsdp_param.py``: ``free_unsharded_param`` frees
    ``all_gather_outputs`` and ``_unsharded_inner_tensors``), later gathers setting
    ``out._scale = scale``: the scale stays with the unsharded parameter. The estimate read 112 B
    below the trace on each stage of 4 blocks (7 converted Linears each, WIDE PP 2 × TP 2 ×
    FSDP 2). torchtitan converts the blocks' Linears whose features divide by 16."""
    if not (cfg.float8 and cfg.float8_all_gather and cfg.fsdp):
        return vec()
    converted = sum(1 for i, o in block_linears(w, 1) if i % 16 == 0 and o % 16 == 0)
    return vec(parameters=4 * converted * layers)


def tp_styles_kept(w: WorkloadConfig, tokens: int, t: int, c: int) -> int:
    """What torchao's Float8 TP styles (tensorwise under TP: torchtitan's
    ``enable_float8_tensorwise_tp``) change in a block's kept tensors, as their saved tensors
    show: ``PrepareFloat8ModuleInput`` casts the attention's and the MLP's sequence-sharded
    input to fp8 before the all-gather, so each Linear keeps the gathered input at one byte;
    ``Float8RowwiseParallel`` casts ``wo``'s and ``w2``'s input to fp8 as it enters, so ``w2``
    keeps the SwiGLU product at one byte (the bf16 one freed) and ``wo`` an fp8 copy of the
    attention's output, which the kernel keeps as well; each with its 4-byte scale."""
    h, f, q = w.hidden, w.ffn, w.heads * w.head_dim
    # the four fp8 tensors' fp32 scales: a 4-block stage's forward left 64 B more before
    return -2 * h * (c - 1) * tokens - (f // t) * (c - 1) * tokens + (q // t) * tokens + 16


def recompute_cast(
    w: WorkloadConfig, tokens: int, t: int, c: int, gathered_fp8: bool
) -> tuple[int, int]:
    """Under torchao's Float8 TP styles, what a checkpointed block's backward holds beside what
    it saved (its highest moment, as its trace shows), as the recomputation casts ``w2``'s
    input or weight: (activations, temporaries). Filed as activations (the recomputation runs
    the block's modules): ``wo``'s reduce-scattered output, the SwiGLU product in bf16
    (``Float8RowwiseParallel`` keeps its fp8 cast, the module call still holds its argument)
    and the larger cast: the product's (its fp32 copies, 8 B an element beside the fp8 one it
    keeps) or the weight's (9 B an element, none gathered in fp8 by FSDP). As temporaries: the
    block's output gradient, the recomputed residual sum (the block's own forward runs outside its
    module's hooks) and the output gradient's fp8 all-gather (``Float8RowwiseParallel`` casts
    it before gathering). Above w2's recast of its weight in backward, its input kept in fp8:
    none of the other casts of ``linear_backward``."""
    x = tokens // t * w.hidden * c
    product = tokens * (w.ffn // t)
    weight = 0 if gathered_fp8 else 9 * (w.ffn // t) * w.hidden
    return x + product * c + max(8 * product, weight), 2 * x + tokens * w.hidden


def linear_forward(x: int, wt: int, gathered_fp8: bool) -> int:
    """Bytes one Float8Linear's forward holds above its input and weight at its highest:
    the input's cast, then the weight's beside the fp8 input (none gathered in fp8)."""
    return max(9 * x, 0 if gathered_fp8 else x + 9 * wt)


def linear_backward(
    x: int, wt: int, g: int, gathered_fp8: bool, recipe: str, scales: tuple[int, ...] = ()
) -> int:
    """Bytes one Float8Linear's backward holds above its saved input and weight and its output
    gradient at its highest (its input gradient, 2·x, included; see the module); with
    ``scales`` (:func:`cast_scales`) each cast's scale, kept from its cast to the node's end."""
    s = [sum(scales[: k + 1]) for k in range(4)] if scales else [0] * 4
    w8 = 0 if gathered_fp8 else wt
    moments = [9 * g + s[0]] if gathered_fp8 else [9 * g + s[0], g + 9 * wt + s[1]]
    if recipe == "rowwise_with_gw_hp":  # the weight gradient's matmul in bf16, no second casts
        return max(*moments, g + w8 + 2 * x + 2 * wt + s[len(moments) - 1])
    k = len(moments)  # the casts so far: the gradient's, the weight's unless gathered in fp8
    return max(*moments, g + w8 + 2 * x + 9 * g + s[k], 2 * g + w8 + 2 * x + 9 * x + s[k + 1])


def forward_casts(tokens: int, i: int, o: int, recipe: str, gathered_fp8: bool) -> int:
    """One Float8Linear's forward at its highest above its input and weight: the input's cast
    (9 B an element), then the weight's beside the fp8 input (none gathered in fp8), each with
    its fp32 scale (tensorwise 4 B; rowwise one per row, ``axiswise_dim=-1``: the input's
    tokens, the weight's output features)."""
    rowwise = recipe != "tensorwise"
    s_in, s_w = (4 * tokens, 4 * o) if rowwise else (4, 4)
    x, wt = tokens * i, i * o
    return max(9 * x + s_in, 0 if gathered_fp8 else x + 9 * wt + s_in + s_w)


def cast_scales(tokens: int, i: int, o: int, recipe: str, gathered_fp8: bool) -> tuple[int, ...]:
    """The fp32 scales of a Float8Linear's backward casts, in their order (torchao 0.18's
    ``matmul_with_hp_or_float8_args.backward``): the output gradient's, the weight's (none
    gathered in fp8: its scale came with it), the gradient's again and the input's for the
    weight gradient (not under rowwise_with_gw_hp); tensorwise one scalar each, rowwise one per
    row of the cast's reduction (``axiswise_dim``: -1 for the first two, 0 for the others)."""
    rowwise = recipe != "tensorwise"
    scales = [4 * tokens if rowwise else 4]
    if not gathered_fp8:
        scales.append(4 * i if rowwise else 4)
    return (*scales, 4 * o if rowwise else 4, 4 * i if rowwise else 4)


def forward_transient(
    w: WorkloadConfig, tokens: int, t: int, gathered_fp8: bool, recipe: str = "", c: int = 2
) -> int:
    """The largest bytes one Float8Linear of the block holds above its input in forward. Under
    torchao's Float8 TP styles (tensorwise beside TP, :func:`tp_styles_kept`) each Linear's input
    comes in fp8, kept: only the weight's cast (and its 4-byte scale), ``w2``'s beside the bf16
    SwiGLU product its module call still holds (the trace's forward at ``w2``: 45,124 B above
    the kept tensors and one cast, PP 2 x TP 2, hidden 256, FFN 704, 128 tokens)."""
    linears = block_linears(w, t)
    if recipe == "tensorwise" and t > 1:
        casts = [0 if gathered_fp8 else 9 * i * o + 4 for i, o in linears]
        # Float8RowwiseParallel's own cast of wo's and w2's input as it enters (torchao 0.18
        # float8_tensor_parallel.py _prepare_input_fn: hp_tensor_to_float8_dynamic): its fp32
        # scaled copy and the clamp's beside the fp8 one kept (8 B an element) — above the
        # weight's cast where the tokens outnumber the hidden size · 9/8, or under FSDP's fp8
        # all-gather (PP 2 × TP 2 × FSDP 2, 128 tokens, hidden 256: the first stage's forward
        # 360,448 B below the trace before, read in its live storages)
        wo_in, w2_in = 8 * tokens * linears[3][0], 8 * tokens * linears[-1][0]
        return max(*casts[:-1], wo_in, max(casts[-1], w2_in) + tokens * linears[-1][0] * c)
    recipe = recipe or "tensorwise"
    return max(forward_casts(tokens, i, o, recipe, gathered_fp8) for i, o in linears)


def backward_transient(
    w: WorkloadConfig, tokens: int, t: int, gathered_fp8: bool, recipe: str, c: int = 2
) -> int:
    """What ``w2``'s backward holds above the block's saved tensors, the first of the block's
    backward and its highest moment (its input is the widest, the SwiGLU's product). Under
    torch's TP styles (rowwise beside TP) ``w2``'s output gradient comes all-gathered to the
    whole sequence in the compute dtype (``c``; ``RowwiseParallel``'s ``Shard(1)`` output
    going back) and stays beside its casts: PP 2 × TP 2 (hidden 256, FFN 704, 128 tokens) the
    first stage's later backward 65,536 B below the trace before, read in its live storages
    (torchao's Float8 TP styles gather it in fp8, cast: none)."""
    i, o = block_linears(w, t)[-1]
    scales = cast_scales(tokens, i, o, recipe, gathered_fp8)
    gathered = tokens * w.hidden * c if t > 1 and recipe != "tensorwise" else 0
    return gathered + linear_backward(tokens * i, i * o, tokens * o, gathered_fp8, recipe, scales)


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def pipelined_peaks(
    peak: Vec, more: Vec, f8_b: int, recompute: int, grad_in: int, head: Vec | None,
    recast: int = 0,
) -> tuple[Vec, Vec]:  # fmt: skip
    """A pipeline stage's backward peaks with a Float8 ``w2``'s casts beside everything the
    block saved: on the last stage its head's saved tensors freed but the logits and the loss,
    with the last block's output gradient (``checkpoint_form.head_freed``: ``head``; the
    logits were counted freed, 131,072 B, and the gradient left out, 32,768 B, on the
    rowwise_with_gw_hp PP 2 × TP 2 toy, hidden 256, FFN 704, 128 tokens); ``recast``: what
    the checkpointed block's stopped recomputation still holds of ``w2``'s forward
    (:func:`recomputed_input_cast`)."""
    if not f8_b:
        return peak, more
    f8 = vec(activations=recompute + recast, temporaries=f8_b + grad_in)
    f8 = add(f8, head) if head is not None else f8
    return _larger(peak, f8), _larger(more, f8)


def recomputed_input_cast(w: WorkloadConfig, tokens: int, t: int, recipe: str) -> int:
    """A checkpointed block's recomputation stops (torch's early stop) inside ``w2``'s forward
    with its input's fp8 copy made and its scale (rowwise: 4 B a token): the trace holds them
    beside ``w2``'s backward casts (rowwise_with_gw_hp PP 2 × TP 2, full and per-op
    checkpointing, hidden 256, FFN 704, 128 tokens: 45,568 B, read in the trace's live
    storages; the stage's later backward 44,672 B below it before). Read under torch's TP
    styles only (rowwise recipes beside TP): without TP the traces of every recipe (full and
    per-op checkpointing) peak without it, and torchao's TP styles have ``recompute_cast``."""
    if not recipe or recipe == "tensorwise" or t == 1:
        return 0
    return tokens * (w.ffn // t) + (4 * tokens if recipe != "tensorwise" else 4)


def unpipelined_peak(peak: Vec, blocks: Vec, f8_b: int, half: int, made: int) -> Vec:
    """Without a pipeline: the block moment ``blocks`` as a Float8 ``w2``'s casts run — its
    saved input still kept, its weight gradient not yet made, the SwiGLU's gradient buffers
    (3 × ``half``) not yet made."""
    if not f8_b:
        return peak
    return _larger(peak, add(blocks, vec(activations=half, temporaries=f8_b - 3 * half - made)))


__all__ = [
    "backward_transient", "block_linears", "cast_scales", "forward_casts", "forward_transient",
    "gathered_scales", "linear_backward",
    "linear_forward", "pipelined_peaks", "recompute_cast", "recomputed_input_cast",
    "unpipelined_peak",
]  # fmt: skip
