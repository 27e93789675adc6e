"""BLOOM's last block's attention going forward, with LoRA outside autocast (``fp32``,
``bf16``, ``mixed``), where the vocabulary is small next to the blocks or the tokens few beside
the width: there the step holds more than at its MLP going back (BLOOM ``mixed`` LoRA q,v 0.991
of the trace, any slice of its fused query_key_value adapted; fp32 512 × 1 0.969). Under
autocast: ``bloom_amp``.

Read in transformers 5.24.0 ``models/bloom/modeling_bloom.py`` and off the trace's live storages
at the forward's peak (h 128, f 512, V 128). ``BloomAttention.forward`` keeps in its locals,
until it returns, the fused q/k/v output (s·b·3h·c where b > 1: ``reshape`` copies q, k and v
apart; at b = 1 they are its views, kept), ``alibi.baddbmm``'s scores and ``attn_weights +
attention_mask`` (a·s²·b·c each). ``F.softmax(attn_weights, dim=-1, dtype=torch.float32)``
casts its 16-bit input to fp32 first (a·s²·b·4 beside its fp32 output, which it keeps for
backward: torch 2.13 aten/src/ATen/native/SoftMax.cpp ``softmax``: ``input_.toType(dtype)``
then ``_softmax``; only CUDA's Half input skips the copy, ``half_to_float``) — the peak in 16
bits. In fp32 there is no copy: the peak is at the output projection's sum, the merged heads
(no frozen layer keeps them) and its output beside ``dropout_add``'s sum, or an adapted o's
base output, scaled update and sum (peft 0.21 ``lora.layer.Linear.forward``).
``BloomModel.forward`` holds the embeddings' output, ALiBi's slopes (a·4, fp32) and bias
(b·a·s·c: ``.to(hidden_states.dtype)``) and the eager causal mask (b·s²·c); ``BloomBlock``
the input LayerNorm's output where nothing saves it (an adapter's own copy of it, fp32 or
dropped, is saved instead). Made later: the probabilities' 16-bit copy, the attention's
``dropout_add``, the MLP (its LayerNorm's input and statistics, GELU's input, its adapters'
tensors), the output projection's adapter, the final LayerNorm's, the head's and the loss's
tensors (``neox_moments.released``) and ``--dropout``'s masks and dropped copies. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import _cuda
from profiling.estimate.lora_bytes import adapter_bytes, head_adapter, mask_bytes, own_copies
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

FORWARD = "forward, the last block's attention"


def applies(d: Dims, cfg: TrainingConfig) -> bool:
    """LoRA on transformers' BLOOM outside autocast (``neox_moments`` holds)."""
    return d.extra.get("hf_module") == "bloom" and cfg.lora_rank is not None


def _made_later(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, int]:
    """What the end of forward holds that the last block makes after its softmax (the loss's,
    the final LayerNorm's and the head's aside), and of that what is made before the output
    projection's sum: the probabilities' copy (and dropped copy, mask), o's adapter's."""
    T, h, f, a, s, b = d.s * d.b, d.h, d.f, d.a, d.s, d.b
    r, ad = int(cfg.lora_rank or 0), adapter_bytes(cfg)
    probs = a * s * s * b
    early = probs * e.c if e.c != 4 else 0  # the probabilities' 16-bit copy (fp32: the same)
    if cfg.dropout:  # the probabilities' mask and dropped copy
        early += probs * ((1 if _cuda(cfg) else e.c) + e.c)
    stats = 8 if _cuda(cfg) else 2 * e.r
    later = T * (h * e.r + stats)  # dropout_add's output: the MLP's LayerNorm's input, stats
    later += T * f * e.c  # GELU's input (``GeLUFunction`` saves it)
    if cfg.dropout:  # dropout_add's two masks
        later += 2 * T * h * (1 if _cuda(cfg) else e.c)
    # an adapter of the output projection, up or down: its input (its own copy, else the very
    # tensor no frozen layer keeps: the merged heads, the LayerNorm's output, GELU's output),
    # lora_dropout's mask, A's output
    own, mask = own_copies(cfg, e), mask_bytes(cfg) if cfg.lora_dropout else 0
    for x, n_in in (("o", h), ("up", h), ("down", f)):
        if x in cfg.lora_targets:
            kept = T * n_in * ((ad if own else e.c) + mask) + T * r * ad
            early, later = (early + kept, later) if x == "o" else (early, later + kept)
    return early + later, early


def moment(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, gone: float
) -> tuple[str, float, str]:
    """At the last block's softmax, or (if higher: fp32, whose softmax makes no copy) at its
    output projection's sum — the scores still referenced, the merged heads (a transient unless
    o's adapter keeps that very tensor), the projection's output (an adapted o's: its base's,
    the scaled update and the sum, these two in the adapters' dtype); ``gone``: the loss's and
    the final LayerNorm's tensors (``neox_moments.released``)."""
    T, h, a, s, b = d.s * d.b, d.h, d.a, d.s, d.b
    later, early = _made_later(d, e, cfg)
    later += gone + head_adapter(d, e, cfg)
    qkv = {"q", "k", "v"} & set(cfg.lora_targets)
    norm_kept = bool(qkv) and not own_copies(cfg, e)  # the q/k/v adapter keeps it
    held = T * h * e.r + a * 4 + b * a * s * e.r + b * s * s * e.r
    held += 0 if norm_kept else T * h * e.r
    held += T * 3 * h * e.c if b > 1 else 0  # the fused q/k/v output
    probs = a * s * s * b
    scores = probs * 2 * e.c  # baddbmm's and the masked ones
    at_softmax = probs * 4 if e.c != 4 else 0  # its input's fp32 copy
    o = "o" in cfg.lora_targets
    merged = 0 if o and not own_copies(cfg, e) else T * h * e.c
    if o:  # at its adapter's sum: the base's output, the scaled update, the sum
        out = T * h * (e.c + 2 * adapter_bytes(cfg))
    else:  # at dropout_add's sum: the projection's output, the sum (kept: the MLP's norm's
        # input), with --dropout its mask (kept) and dropped copy
        m = (1 if _cuda(cfg) else e.c) if cfg.dropout else 0
        out = T * h * (e.c + e.r + (m + e.c if m else 0))
    at_dense = early + merged + out
    where = "its softmax's fp32 input" if at_softmax >= at_dense else "its output projection"
    value = fwd - later + held + scores + max(at_softmax, at_dense)
    calc = (
        f"end of forward − what is made later (the loss's, the final LayerNorm's, the "
        f"probabilities' copy, the MLP's and the adapters') {fmt_bytes(later)} + the embeddings, "
        f"ALiBi's slopes and bias, the causal mask, the LayerNorm's and the fused q/k/v outputs "
        f"{fmt_bytes(held)} + the scores and the masked scores {fmt_bytes(scores)} + at {where} "
        f"{fmt_bytes(max(at_softmax, at_dense))} = {fmt_bytes(value)}"
    )
    return FORWARD, value, calc


__all__ = ["FORWARD", "applies", "moment"]
