"""LitGPT's CausalSelfAttention, put in place of transformers' in a model its finetune scripts
run (a Llama, Mistral, Qwen2, Phi-3, Gemma or Gemma 2 shape under any of them:
``WorkloadConfig.litgpt_qkv``; Gemma 2's soft-capped scores take LitGPT's explicit path,
``_capped``).

litgpt/model.py at 00af8b0 (the same at 43c44323, where the Gemma rows were measured)::

    qkv = self.attn(x)
    qkv = qkv.view(B, T, n_query_groups, q_per_kv + 2, head_size).permute(0, 2, 3, 1, 4)
    q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
    if n_query_groups != n_head:  # (training)
        k = k.expand(B, n_query_groups, q_per_kv, T, head_size)
        v = v.expand(B, n_query_groups, q_per_kv, T, head_size)
    q, k, v = (t.reshape(B, -1, T, head_size) for t in (q, k, v))
    q = torch.cat((apply_rope(q[..., :rope_n_elem], cos, sin), q[..., rope_n_elem:]), dim=-1)
    k = torch.cat((apply_rope(k[..., :rope_n_elem], cos, sin), k[..., rope_n_elem:]), dim=-1)
    y = F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=True).transpose(1, 2)
    return self.proj(y.reshape(B, T, n_head * head_size))

What it keeps for backward where transformers' keeps q and k after RoPE and v (the key/value
width) and the output: q and the keys rotated after their expansion to every head (n_head wide
each, ``torch.cat``'s outputs), and v as the reshape gives it — a view of the whole fused
output where the reshape can view it (one group of keys, or one query a group), else a copy
expanded to every head. ``apply_rope`` multiplies by LitGPT's fp32 tables (``max_seq_length``'s
setter rebuilds them in fp32 after Fabric's cast): fp32 transients, nothing kept. The fused
``query_key_value`` is adapted as LitGPT's ``LoRAQKVLinear`` (``profiling.trace.lora_neox``).
Imports torch.
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

FUSED = "query_key_value"  # the name profiling.trace.lora_neox adapts


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """litgpt/model.py's ``apply_rope``."""
    half = x.size(-1) // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)


# LitGPT's fp32 tables, one per model as its buffers are: the blocks share transformers'
# cos/sin, so each gets one fp32 copy (of the first row: the positions are every sequence's).
# A copy even of an fp32 table (autocast): a view would hold its key alive, and the previous
# step's tables with it
_TABLES = WeakIdKeyDictionary()


def _fp32(table: torch.Tensor) -> torch.Tensor:
    if table not in _TABLES:
        _TABLES[table] = table[:1].to(torch.float32, copy=True).unsqueeze(1)
    return _TABLES[table]


def _forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    heads, groups, hs = self.litgpt_shape  # type: ignore[misc]  (set by use_litgpt_attention)
    per = heads // groups
    b, t, _ = hidden_states.shape
    qkv = getattr(self, FUSED)(hidden_states)
    qkv = qkv.view(b, t, groups, per + 2, hs).permute(0, 2, 3, 1, 4)
    q, k, v = qkv.split((per, 1, 1), dim=2)
    if groups != heads:
        k = k.expand(b, groups, per, t, hs)
        v = v.expand(b, groups, per, t, hs)
    q, k, v = (x.reshape(b, -1, t, hs) for x in (q, k, v))
    cos, sin = (_fp32(x) for x in position_embeddings)
    q = torch.cat((_rope(q, cos, sin), q[..., hs:]), dim=-1)
    k = torch.cat((_rope(k, cos, sin), k[..., hs:]), dim=-1)
    scale: float = self.scaling  # type: ignore[assignment]  (transformers' attribute)
    cap = getattr(self, "attn_logit_softcapping", None)  # Gemma 2's (transformers' attribute)
    if cap:
        y = _capped(q, k, v, scale, float(cap), getattr(self, "sliding_window", None))
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale).transpose(1, 2)
    return self.o_proj(y.reshape(b, t, heads * hs)), None  # type: ignore[operator]


def _capped(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, cap: float, window: Any
) -> torch.Tensor:
    """LitGPT's ``scaled_dot_product_attention`` with soft-capped scores (Gemma 2: "with
    softcapping we cannot use SDPA"; litgpt/model.py at 00af8b0): the explicit matmuls, the
    causal mask made in every block (and a sliding window's bias added in its layers:
    ``CausalSelfAttention.forward``), the fp32 softmax cast back. Kept for backward: q and k
    (the scores' matmul), the tanh output, the fp32 softmax, its 16-bit copy and v."""
    t = q.size(2)
    scores = q @ k.mT * scale
    scores = torch.tanh(scores / cap) * cap
    if window is not None:  # LitGPT's sliding layers: the mask in -inf, then the window's bias
        mask = torch.ones(t, t, dtype=q.dtype, device=q.device).triu(diagonal=1)
        mask.masked_fill_(mask.bool(), float("-inf"))
        bias = torch.ones_like(mask).tril(diagonal=-int(window))
        bias.masked_fill_(bias.bool(), float("-inf"))
        mask += bias
    else:
        mask = torch.ones(t, t, dtype=q.dtype, device=q.device).triu(diagonal=1)
        mask.masked_fill_(mask.bool(), torch.finfo(q.dtype).min)
    scores = scores + mask
    scores = F.softmax(scores, dim=-1, dtype=torch.float).to(dtype=q.dtype)
    return (scores @ v).transpose(1, 2)


def use_litgpt_attention(model: nn.Module) -> int:
    """Run every transformers attention of ``model`` with q, k, v projections apart as
    LitGPT's: one fused Linear in their place; how many there are."""
    count = 0
    for module in model.modules():
        if isinstance(getattr(module, "qkv_proj", None), nn.Linear):  # Phi-3's, fused already
            count += _fused_already(module)
            continue
        q, k, v = (getattr(module, f"{x}_proj", None) for x in "qkv")
        if not all(isinstance(x, nn.Linear) for x in (q, k, v)):
            continue
        assert isinstance(q, nn.Linear) and isinstance(k, nn.Linear) and isinstance(v, nn.Linear)
        hs = int(getattr(module, "head_dim"))  # noqa: B009  (transformers' attribute)
        fused = nn.Linear(
            q.in_features,
            q.out_features + 2 * k.out_features,
            bias=q.bias is not None,
            device=q.weight.device,
            dtype=q.weight.dtype,
        )
        for name in ("q_proj", "k_proj", "v_proj"):
            delattr(module, name)
        setattr(module, FUSED, fused)
        module.litgpt_shape = (q.out_features // hs, k.out_features // hs, hs)  # type: ignore[assignment]
        module.forward = types.MethodType(_forward, module)  # type: ignore[method-assign]
        count += 1
    return count


def _fused_already(module: nn.Module) -> int:
    """transformers' Phi-3 attention (one ``qkv_proj``) as LitGPT's: LitGPT builds Phi-3 as a
    Llama (litgpt/config.py "Phi-3-mini-4k-instruct" at 00af8b0: its ``attn`` Linear, LLaMAMLP),
    so the same forward on the same fused Linear, named as ``profiling.trace.lora_neox`` adapts
    it."""
    config: Any = getattr(module, "config")  # noqa: B009  (transformers' attribute)
    hs = int(getattr(module, "head_dim"))  # noqa: B009  (transformers' attribute)
    setattr(module, FUSED, getattr(module, "qkv_proj"))  # noqa: B009
    delattr(module, "qkv_proj")
    heads, groups = int(config.num_attention_heads), int(config.num_key_value_heads)
    module.litgpt_shape = (heads, groups, hs)  # type: ignore[assignment]
    module.forward = types.MethodType(_forward, module)  # type: ignore[method-assign]
    return 1
