"""BLOOM's last block's attention under autocast (``amp-*``) with LoRA, where the vocabulary is
small next to the blocks: the step's highest moment is there, going forward (BLOOM LoRA q,v
0.83 of the trace, all but the head 0.86), not in its MLP.

Read in transformers 5.24.0 ``models/bloom/modeling_bloom.py`` (``BloomAttention.forward``)
and off the trace's live storages at the forward's peak (h 128, f 512, V 128, seq 256 × 2):
``alibi.baddbmm`` runs in 16 bits under autocast (scores a·s²·b·2), the eager causal mask is in
the hidden states' dtype (fp32 under autocast), so ``attn_weights + attention_mask`` is an fp32
a·s²·b·4 tensor; both stay referenced by ``forward``'s locals until it returns, as do the fused
q/k/v output (s·b·3h·2 when b > 1; at b = 1 q, k and v are its views, kept), the merged heads
(s·b·h·2) and the output projection's output (s·b·h·2), beside the softmax's fp32 output and
its 16-bit copy (kept, counted per block).

At ``dropout_add`` of the last block's attention the step holds what the end of forward holds,
less what is made later — the loss's and the final LayerNorm's tensors, the head's 16-bit
weight copy, the MLP's (its LayerNorm's statistics, both projections' 16-bit weight copies, the
first one's output GELU keeps, an adapted projection's adapter's tensors) — plus what the
forward holds unsaved then: the fp32 embeddings, ALiBi's fp32 bias (b·a·s·4), the causal mask
(b·s²·4), autocast's copies of the first block's adapters' A whose input needs no gradient
(``lora_neox_amp.first_block_a_copies``), the input LayerNorm's fp32 output, and the transients
above (an adapted output projection: its B output and scaled copy too). With ``--dropout`` the
peak is at the probabilities' dropout, whose 16-bit input is alive but not saved, before the
merged heads, the output projection's weight copy and ``dropout_add``'s masks and sum are made.
Going forward at its MLP (``neox_amp_moments.forward``) ALiBi's bias and the causal mask are
held in place of position indices; going back, down's 16-bit weight copy is freed before GELU
goes back. QLoRA (bitsandbytes' 4-bit layers hand back their input's dtype): the fused q/k/v
output is fp32 and so, when b > 1, are the copies of q, k and v its views make (autocast's
16-bit copies of them are the saved ones), no layer has a 16-bit weight copy, GELU's input is
fp32; on few tokens beside h the output projection's matmul, its weight dequantized, before
``dropout_add``'s sum (``neox_qlora_amp`` for its MLP). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.lora_bytes import head_adapter, mask_bytes
from profiling.estimate.lora_neox_amp import bnb_amp, first_block_a_copies
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

FORWARD = "forward, the last block's attention"


def applies(d: Dims, cfg: TrainingConfig) -> bool:
    """LoRA on transformers' BLOOM under autocast (``neox_amp_moments.applies`` holds)."""
    return d.extra.get("hf_module") == "bloom" and cfg.lora_rank is not None


def masks(d: Dims) -> int:
    """What BLOOM's forward holds beside its blocks under autocast, in fp32: ALiBi's slopes and
    bias (a·4 + b·a·s·4) and the eager causal mask (b·s²·4); it has no position indices."""
    return d.a * 4 + d.b * d.a * d.s * 4 + d.b * d.s * d.s * 4


def dropped_probs(d: Dims, cfg: TrainingConfig) -> int:
    """QLoRA with ``--dropout``: the fp32 probabilities' dropped copies alive unsaved (fp32 as the
    4-bit fused q/k/v output is: ``softmax(..., dtype=float32).to(query_layer.dtype)``; ``bmm``
    saves autocast's 16-bit copy) — ``BloomAttention.forward`` returns them, ``BloomBlock``
    holds its own through its MLP and ``BloomModel.forward``'s ``outputs`` the block before's
    until the next block returns: two blocks' a·s²·b·4."""
    if not (bnb_amp(cfg) and cfg.dropout):
        return 0
    return min(d.L, 2) * d.a * d.s * d.s * d.b * 4


def moment(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, gone: float
) -> tuple[str, float, str]:
    """At the last block's attention's ``dropout_add``; ``gone``: the loss's and the final
    LayerNorm's tensors (``neox_moments.released``)."""
    T, h, f, a, s, b = d.s * d.b, d.h, d.f, d.a, d.s, d.b
    r, t = int(cfg.lora_rank or 0), cfg.lora_targets
    later = gone + int(d.V or 0) * h * 2 + head_adapter(d, e, cfg)
    bnb = bnb_amp(cfg)  # 4-bit layers: no weight copies; fp32 outputs of fp32 inputs
    # the MLP's: LayerNorm stats, weight copies, GELU's input (fp32 out of a 4-bit up)
    later += T * 8 + (0 if bnb else 2 * h * f * 2) + T * f * (4 if bnb else 2)
    for x, n_in, n_out in (("up", h, f), ("down", f, h)):
        if x in t:  # its adapter's: A's 16-bit input (and dropout's mask), A's output, the copies
            later += T * n_in * (2 + mask_bytes(cfg) * (cfg.lora_dropout > 0))
            later += T * r * 2 + r * (n_in + n_out) * 2
    held = T * h * 4 + masks(d) + first_block_a_copies(d, cfg)
    held += T * h * 4  # the input LayerNorm's fp32 output
    scores = a * s * s * b * (2 + 4)  # baddbmm's 16-bit scores, the fp32 masked ones
    fused = T * 3 * h * 2 if b > 1 else 0  # at b = 1 q, k, v are its views: kept, counted
    if bnb:  # fp32, and so its views' copies (b > 1): autocast's 16-bit ones are kept instead
        fused = T * 3 * h * 4 + (3 * T * h * 4 if b > 1 else 0)
    if cfg.dropout and not bnb:  # at the probabilities' dropout: their 16-bit copy, unsaved
        mask = 1  # bool masks: CUDA only (neox_amp_moments.applies)
        # dense's copy, dropout_add's masks and sum
        later += h * h * 2 + T * h * (2 * mask + 4)
        outs, words = fused + a * s * s * b * 2, "the probabilities' 16-bit copy"
    else:  # at dropout_add: the merged heads, the output projection's output(s)
        outs = fused + 2 * T * h * 2 + (2 * T * h * 2 if "o" in t else 0)
        words = "the merged heads and the output projection's output" + ("s" if "o" in t else "")
        if cfg.dropout:  # dropout_add's 16-bit dropped output; the MLP's mask not made yet
            outs += T * h * 2
            later += T * h * 1
        if bnb:  # or at dense's matmul, its weight dequantized, dropout_add's sum not made
            from profiling._config_behaviours import double_quant
            from profiling.estimate.bnb import dequant_absmax_bytes

            absmax = dequant_absmax_bytes(h * h, double_quant(cfg))
            outs = max(outs, fused + T * h * 2 + h * h * 2 + max(T * h * 2, absmax) - T * h * 4)
        outs += dropped_probs(d, cfg)
    value = fwd - later + held + scores + outs
    calc = (
        f"end of forward − what is made later (the loss's, the final LayerNorm's, the head's "
        f"copies, the MLP's) {fmt_bytes(later)} + the embeddings, ALiBi's bias, the causal mask, "
        f"the first block's A copies and the LayerNorm's output {fmt_bytes(held)} + the scores "
        f"a·s²·b·(2 + 4) {fmt_bytes(scores)} + the fused q/k/v output and {words} "
        f"{fmt_bytes(outs)} = {fmt_bytes(value)}"
    )
    return FORWARD, value, calc


__all__ = ["FORWARD", "applies", "dropped_probs", "masks", "moment"]
