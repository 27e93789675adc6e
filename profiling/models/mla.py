"""Multi-head latent attention (DeepSeek-V2), built from a config's shape for the trace.

As transformers' ``DeepseekV2Attention`` holds it: queries from ``q_proj`` (or, with a
``q_lora_rank``, ``q_a_proj`` → RMSNorm → ``q_b_proj``), each head's query split into a part
without position (``qk_nope_head_dim``) and a rotary part (``qk_rope_head_dim``); keys and values
through one latent: ``kv_a_proj_with_mqa`` gives the latent (``kv_lora_rank``) and one rotary key
shared by every head, RMSNorm on the latent, ``kv_b_proj`` expands it to each head's key part and
value (``v_head_dim``); the rotary key is broadcast to the heads and concatenated. SDPA runs over
keys of ``nope + rope`` and values of ``v_head_dim``. YaRN's RoPE scaling changes the tables'
values and the softmax scale, not any size, so the rotation here is plain RoPE.

Imported lazily by ``hf_blocks``: imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from profiling.models.blocks import _RMSNorm, _rotate
from profiling.models.config import WorkloadConfig


class MLAttention(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Any) -> None:
        super().__init__()
        h, heads, qk = c.hidden, c.heads, c.qk_nope_dim + c.qk_rope_dim
        self.config = c
        if c.q_lora_rank:
            self.q_a_proj = nn.Linear(h, c.q_lora_rank, bias=False, device=device)
            self.q_a_layernorm = _RMSNorm(c.q_lora_rank, device, c.norm_eps)
            self.q_b_proj = nn.Linear(c.q_lora_rank, heads * qk, bias=False, device=device)
        else:
            self.q_proj = nn.Linear(h, heads * qk, bias=False, device=device)
        rank = c.kv_lora_rank or 0
        self.kv_a_proj_with_mqa = nn.Linear(h, rank + c.qk_rope_dim, bias=False, device=device)
        self.kv_a_layernorm = _RMSNorm(rank, device, c.norm_eps)
        out = heads * (c.qk_nope_dim + c.v_dim)
        self.kv_b_proj = nn.Linear(rank, out, bias=False, device=device)
        self.o_proj = nn.Linear(heads * c.v_dim, h, bias=False, device=device)

    def forward(
        self, y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        c = self.config
        b, t, _ = y.shape
        nope, rope, heads = c.qk_nope_dim, c.qk_rope_dim, c.heads
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(y))) if c.q_lora_rank else self.q_proj(y)
        q = q.view(b, t, heads, nope + rope).transpose(1, 2)
        q_nope, q_pe = q.split((nope, rope), dim=-1)
        latent, k_pe = self.kv_a_proj_with_mqa(y).split((c.kv_lora_rank or 0, rope), dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, t, heads, nope + c.v_dim)
        k_nope, v = kv.transpose(1, 2).split((nope, c.v_dim), dim=-1)
        k_pe = _rotate(k_pe.view(b, 1, t, rope), cos, sin)
        q = torch.cat((q_nope, _rotate(q_pe, cos, sin)), dim=-1)
        k = torch.cat((k_nope, k_pe.expand(b, heads, t, rope)), dim=-1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(a.transpose(1, 2).reshape(b, t, heads * c.v_dim))


__all__ = ["MLAttention"]
