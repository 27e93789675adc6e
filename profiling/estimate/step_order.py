"""The order a for-loop optimizer step visits the parameters: the module's own (``parameters()``
registration order), so the largest pair of neighbours it holds at once.

torch's for-loop steps (``_single_tensor_adam``, ``_single_tensor_rmsprop``,
``_single_tensor_adagrad`` in torch/optim/adam.py, rmsprop.py, adagrad.py at torch 2.13) make
each parameter's scratch in a Python variable (Adam's ``denom``, RMSprop's ``avg``, Adagrad's
``std``) that keeps the previous parameter's until the new one is assigned: at its highest the
step holds ``k`` scratch tensors of parameter i beside one of parameter i - 1. Which tensor
comes before the largest is the module's order, which differs between our blocks and
transformers' classes (checked against the built modules by
``tests/profiling/estimate/test_step_order.py``).

No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.optim_states import lora_layers
from profiling.models.config import WorkloadConfig

# The module order of the layers LoRA adapts (transformers' attention, then the MLP)
_ROLE_ORDER = ("qkv", "q", "k", "v", "o", "gate", "up", "down")
_ATTN = ("q", "k", "v", "o")


def loop_peaks(sizes: list[int]) -> list[int]:
    """Elements a for-loop step holds at its highest with 1 to 4 scratch tensors per
    parameter: ``max_i k·n_i + n_(i-1)`` over the parameters in the step's order (torch's
    for-loop steps hold 1 or 2; transformers' Adafactor 2 to 4, ``optim_states``)."""
    return [max((k * n + (sizes[i - 1] if i else 0) for i, n in enumerate(sizes)), default=0)
            for k in (1, 2, 3, 4)]  # fmt: skip


def tensor_order(
    w: WorkloadConfig, hf_module: bool, variant: bool, sizes: list[int] | None
) -> list[int] | None:
    """Elements of each parameter tensor in ``parameters()`` order of the module the trace
    builds: ``hf_module`` transformers' class, ``variant`` our Llama-family blocks that follow
    a config (``hf_blocks``); GPT-2's and the encoders' from ``sizes`` (``param_dims``' order);
    None where not itemized (latent attention)."""
    if w.mla or sizes is None:
        return None
    if w.arch == "encoder":
        return _encoder(w, sizes)
    h, V = w.hidden, w.vocab
    head = [] if w.tied_embeddings else [V * h]
    if w.arch == "llama":
        return [V * h, *_llama_blocks(w, hf_module, variant), h, *head]
    if w.arch == "neox":
        prefix = [V * h] + [h, h] * w.embed_norm  # BLOOM's word_embeddings_layernorm
        return prefix + _neox_block(w, hf_module) * w.layers + [h, h] + head + [V] * w.head_bias
    if w.arch == "t5":
        return _t5(w)
    return sizes  # GPT-2's


def _llama_blocks(w: WorkloadConfig, hf_module: bool, variant: bool) -> list[int]:
    h, q, kv, f = w.hidden, w.q_dim, w.kv_dim, w.ffn
    if not variant:  # profiling.models.blocks: norm, attention, norm, MLP
        return [h, q * h, kv * h, kv * h, h * q, h, f * h, f * h, h * f] * w.layers
    b = w.qkv_bias
    attn = [q * h, *[q] * b, kv * h, *[kv] * b, kv * h, *[kv] * b, h * q]
    qk = {"none": [], "head": [w.head_dim] * 2, "full": [q, kv]}[w.qk_norm]
    attn += qk
    if hf_module and w.hf_model_type == "phi3":  # transformers' Phi-3: o_proj, then qkv_proj
        attn, dense = [h * q, (q + 2 * kv) * h, *qk], [2 * f * h, h * f]
    else:
        dense = [f * h, f * h, h * f]
        if w.litgpt_qkv and hf_module:  # litgpt_attention: the fused Linear set after o_proj
            attn = [h * q, *qk, (q + 2 * kv) * h, *[q + 2 * kv] * b]
    norms = [h] * (4 if w.norms == "sandwich" else 2)
    e, s = w.mlp_ffn, w.mlp_ffn * w.shared_experts
    # hf_blocks._Experts: its own stacked weights, then the router, then the shared MLP
    moe = [w.experts * e * h] * 3 + [w.experts * h] + [s * h, s * h, h * s] * bool(s)
    dense_layers = min(w.dense_layers, w.layers)
    blocks = (attn + dense + norms) * dense_layers
    return blocks + (attn + (moe if w.moe else dense) + norms) * (w.layers - dense_layers)


def _neox_block(w: WorkloadConfig, hf_module: bool) -> list[int]:
    """One block: our NeoX (and transformers' GPT-NeoX) its LayerNorms first, transformers'
    Falcon and Phi after the Linears, BLOOM each before its half; each Linear's bias after it."""
    h, q, kv, f = w.hidden, w.q_dim, w.kv_dim, w.ffn
    outs = [q + 2 * kv] if w.fused_qkv else [q, kv, kv]
    attn = [x for o in outs for x in [o * h, *[o] * w.linear_bias]] + [h * q, *[h] * w.linear_bias]
    mlp = [f * h, *[f] * w.linear_bias, h * f, *[h] * w.linear_bias]
    norms = [h, h] * w.neox_norms()
    kind = w.hf_model_type if hf_module else None
    if kind == "bloom":
        return [h, h, *attn, h, h, *mlp]
    if kind in ("falcon", "phi"):
        return attn + mlp + norms
    return norms + attn + mlp


def _encoder(w: WorkloadConfig, sizes: list[int]) -> list[int]:
    """transformers' RoBERTa registers its position embeddings after the embeddings'
    LayerNorm; ViT's layer its two LayerNorms between the attention and the MLP."""
    if w.hf_model_type == "roberta":  # word, positions, types, norm -> word, types, norm, positions
        return [sizes[0], *sizes[2:5], sizes[1], *sizes[5:]]
    if w.hf_model_type != "vit":
        return sizes
    out, n = sizes[:4], 16  # the class token, positions, the patch projection's weight and bias
    for i in range(w.layers):
        b = sizes[4 + i * n : 4 + (i + 1) * n]
        out += b[:10] + b[14:] + b[10:14]
    return out + sizes[4 + w.layers * n :]


def _t5(w: WorkloadConfig) -> list[int]:
    """transformers' T5: each stack's first self-attention holds the relative-position table,
    registered after its q, k, v, o; its layer norm after it."""
    h, q, f = w.hidden, w.q_dim, w.ffn
    attn = [q * h, q * h, q * h, h * q]
    mlp = [f * h] * (2 if w.gated else 1) + [h * f, h]
    first = [*attn, w.rel_buckets * w.heads, h]
    enc = first + mlp + [*attn, h, *mlp] * (w.layers - 1) + [h]
    cross = [*attn, h]
    dec = first + cross + mlp + [*attn, h, *cross, *mlp] * (w.decoder_layers - 1) + [h]
    return [w.vocab * h, *enc, *dec] + ([] if w.tied_embeddings else [w.vocab * h])


def adapter_order(cfg: TrainingConfig, shape: dict[str, Any]) -> list[int]:
    """The trained tensors of LoRA in the step's order: each adapted Linear's A (r × in) and B
    (out × r) — and DoRA's magnitude (out) — in module order, block by block, the LM head's
    last (peft's LoraLayer registers lora_A, lora_B, then lora_magnitude_vector)."""
    r = int(cfg.lora_rank or 0)
    roles = {t: (i, o) for t, i, o in lora_layers(cfg, shape)}
    order = [t for t in _ROLE_ORDER if t in roles]
    if shape.get("litgpt_qkv") and "qkv" in order:  # set after o_proj (litgpt_attention)
        order = [t for t in order if t != "qkv"] + ["qkv"]

    def layer(i: int, o: int) -> list[int]:
        return [r * i, o * r] + [o] * cfg.dora

    block = [x for t in order for x in layer(*roles[t])]
    sizes = block * int(shape.get("layers") or 0)
    if shape.get("arch") == "t5":  # a decoder block: self-attention, cross-attention, MLP
        attn = [x for t in order if t in _ATTN for x in layer(*roles[t])]
        mlp = [x for t in order if t not in _ATTN for x in layer(*roles[t])]
        sizes += (attn + attn + mlp) * int(shape["t5"]["decoder_layers"])
    if "lm_head" in cfg.lora_targets and shape.get("vocab"):
        sizes += layer(int(shape["hidden"]), int(shape["vocab"]))
    return sizes


def loop_elements(
    cfg: TrainingConfig, shape: dict[str, Any], k: int, largest: int
) -> tuple[int, str]:
    """(elements, formula) a for-loop step's ``k`` scratch tensors per parameter hold at their
    highest, the previous parameter's beside (``loop_peaks``). Optimizer in backward steps
    each parameter in its own hook (its scratch freed on return): ``k`` of the largest. A
    shape given by hand: the untied head after the final norm, or two MLP matrices."""
    if cfg.optimizer_in_bwd or not k:
        return k * largest, f"{k} · largest tensor"
    pair = f"max over parameters i of ({k} · n_i + n_(i−1))"
    if cfg.lora_rank is not None:
        return loop_peaks(adapter_order(cfg, shape))[k - 1], f"{pair}, adapters in module order"
    peaks = shape.get("loop_step")
    if peaks and len(peaks) >= k:
        return int(peaks[k - 1]), f"{pair}, in module order"
    h, f = int(shape.get("hidden") or 0), int(shape.get("ffn") or 0)
    return max(k * largest + h, (k + 1) * h * f), f"max({k} · largest + h, {k + 1} · h·f)"


__all__ = ["adapter_order", "loop_elements", "loop_peaks", "tensor_order"]
