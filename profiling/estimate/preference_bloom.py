"""torchtune's DPO step (``--dpo``) on BLOOM: the reference's forward under no_grad at its last
block's MLP, beside what the policy keeps — where the blocks outweigh the head, the step's peak
(BLOOM LoRA q,v mixed, h 128, f 512, V 128, 32 × 2: 0.981 of the trace under
``preference.block_moment``'s bound alone; 1,940,062 B traced).

Read in transformers 5.24.0 ``models/bloom/modeling_bloom.py`` and off the trace's live storages
at that moment (32 × 2 mixed, 64 × 4 bf16). Nothing is saved under no_grad, so what is alive is
what the Python frames hold: ``BloomModel.forward`` the embeddings' output (``inputs_embeds``),
ALiBi's slopes (a·4, fp32) and bias (b·a·s), the eager causal mask (b·s²) — as under grad
(``bloom_softmax``) — and ``outputs``, the block below's returned tuple: its output (this
block's input) and its attention weights (a·s²·b·c: ``BloomAttention`` returns
``attention_probs`` whatever ``output_attentions`` says); ``BloomBlock.forward`` the attention's
output after ``dropout_add`` (the MLP's residual), its returned attention weights and the
post-attention LayerNorm's output; ``BloomMLP.forward`` ``dense_h_to_4h``'s output and
``bloom_gelu_forward``'s eager ops (``x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715
* x * x)))``): four f-wide temporaries beside their input at once, five in all. A single block
holds no block below's weights. QLoRA dequantizes the MLP's weight (f·h·c, as the bound adds).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

NAME = "the reference's forward, BLOOM's last block's MLP"


def moment(d: Dims, inp: TrainingConfig, base: float) -> list[tuple[str, float, str]]:
    """The moments on BLOOM (transformers' own module), none elsewhere: the last block's MLP
    and its attention; ``base``: the end of forward less what the loop holds past backward
    (``preference.block_moment``'s)."""
    from profiling.estimate.activations import Bytes

    if d.extra.get("hf_module") != "bloom":
        return []
    e = Bytes.of(inp.precision)
    s, b, h, f, a = d.s, d.b, d.h, d.f, d.a
    T, c, r = s * b, e.c, e.r
    model = T * h * r + a * 4 + b * a * s * r + b * s * s * r
    probs = a * s * s * b * c
    below = probs if d.L > 1 else 0  # the block below's attention weights, in ``outputs``
    block = 3 * T * h * c + probs  # its input, dropout_add's output, the norm's; its weights
    mlp = 5 * T * f * c
    weight = f * h * c if inp.qlora else 0
    # the base counts DPOLoss's saved tensors and the loss (4·b/2·4 + 4), made later, not the
    # policy's per-row sums and the loop's two logit means (b·4 + 2·4), alive now
    later = 4 * (b // 2) * 4 + 4 - (b * 4 + 2 * 4)
    value = base - later + model + below + block + mlp + weight
    f_ = fmt_bytes
    calc = (
        f"end of forward less what the loop holds past backward {f_(base)} − DPOLoss's "
        f"tensors and the loss, made later, less the policy's per-row sums and the two logit "
        f"means, alive: (4·b/2·4 + 4) − (b·4 + 2·4) = {later} B + the embeddings, "
        f"ALiBi's slopes and bias, the causal mask s·b·h·{r} + a·4 + b·a·s·{r} + b·s²·{r} "
        f"{f_(model)}"
        + (f" + the block below's attention weights a·s²·b·{c} {f_(below)}" if below else "")
        + f" + the block's input, attention output and norm output 3·s·b·h·{c} and its "
        f"attention weights a·s²·b·{c} {f_(block)} + the MLP's projection output and GELU's "
        f"four eager temporaries 5·s·b·f·{c} {f_(mlp)}"
        + (f" + the dequantized weight f·h·{c} {f_(weight)}" if weight else "")
        + f" = {f_(value)}"
    )
    return [(NAME, value, calc), _attention(d, inp, e, base - later + model + below)]


ATTENTION = "the reference's forward, BLOOM's last block's attention"


def _attention(d: Dims, inp: TrainingConfig, e: Bytes, held: float) -> tuple[str, float, str]:
    """The reference's last block's attention under no_grad (``BloomAttention.forward``): its
    locals are all alive until it returns — the fused q/k/v output (s·b·3h), the reshaped
    q, k, v copies (``reshape`` of the transposed views: three s·b·h), ALiBi's scores
    (``alibi.baddbmm``), the masked weights (``attn_weights + attention_mask``) and the
    probabilities, three a·s²·b·c tensors — beside the block's input and the input LayerNorm's
    output (``BloomBlock.forward``). The highest of three points: softmax in fp32 (16-bit
    scores converted to fp32 first, the copy beside the fp32 output: a·s²·b·(2c + 8); in fp32
    the output alone, a·s²·b·3c); with --dropout the attention dropout's output beside its
    input and its 1-byte mask (a·s²·b·(4c + 1)); the output projection's ``dropout_add``
    (``_merge_heads``' copy, the projection's output and the sum, s·b·3h·c; with --dropout the
    dropped copy and its mask too, s·b·h·(c + 1)). ``held``: the MLP moment's count outside
    the block (the end of forward less the loop's, ALiBi's and the mask's tensors, the block
    below's attention weights). The MLP's moment alone read 0.961 of the trace at seq 128 (fp32
    q,v, h 64: −262,144 B)."""
    s, b, h, a, c = d.s, d.b, d.h, d.a, e.c
    T, s2 = s * b, a * s * s * b
    drop = bool(inp.dropout)
    fixed = 8 * T * h * c  # the input, the norm's output, the fused output, three copies
    # softmax(dtype=float32) of 16-bit scores converts them first (ATen SoftMax.cpp ``softmax``:
    # ``input_.toType(dtype)`` but for CUDA's Half): the fp32 copy beside the fp32 output
    cast = 8 if c != 4 else 0
    at_softmax = s2 * (2 * c + (cast or c))
    at_dropout = s2 * (4 * c + 1) if drop else 0
    at_dense = 3 * s2 * c + T * h * (4 * c + 1 if drop else 3 * c)
    inner = max(at_softmax, at_dropout, at_dense)
    value = held + fixed + inner
    f_ = fmt_bytes
    calc = (
        f"the MLP moment's count outside the block {f_(held)} + the block's input, the norm's "
        f"output, the fused q/k/v output and its three reshaped copies s·b·8h·{c} "
        f"{f_(fixed)} + the highest of softmax's (a·s²·b·{2 * c + (cast or c)})"
        + (f", the attention dropout (a·s²·b·{4 * c + 1})" if drop else "")
        + f" and the projection's residual sum (three a·s²·b·{c} + s·b·h·"
        + (f"({4 * c} + 1))" if drop else f"{3 * c})")
        + f" {f_(inner)} = {f_(value)}"
    )
    return ATTENTION, value, calc


__all__ = ["NAME", "moment"]
