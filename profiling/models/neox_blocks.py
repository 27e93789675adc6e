"""Our own blocks for GPT-NeoX's kind of decoder (arch ``neox``: GPT-NeoX/Pythia/StableLM-alpha,
Phi-1/2, Falcon), built from a Hugging Face config's shape.

Used when ``transformers`` is not installed (and inside ``project_blocks``): the parameters
are transformers' to the tensor (a fused ``query_key_value`` or q, k, v apart, biases as the
config says, LayerNorms with bias, Phi's biased LM head), the forward the same arithmetic with
PyTorch's fused kernels: LayerNorm, GELU (exact or tanh), SDPA over partially rotated heads
(the leading ``rotary_dim`` of each head rotate, the rest pass), grouped or multi-query keys.
Imported lazily by ``workloads.build_model``: imports torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.types import Device

from profiling.models.blocks import BlocksLM, _attend, _dropout, _rotate, head_loss
from profiling.models.config import WorkloadConfig


class _Attention(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h, bias = c.hidden, c.linear_bias
        self.config = c
        if c.fused_qkv:
            self.query_key_value = nn.Linear(h, c.q_dim + 2 * c.kv_dim, bias=bias, device=device)
        else:
            self.q_proj = nn.Linear(h, c.q_dim, bias=bias, device=device)
            self.k_proj = nn.Linear(h, c.kv_dim, bias=bias, device=device)
            self.v_proj = nn.Linear(h, c.kv_dim, bias=bias, device=device)
        self.dense = nn.Linear(c.q_dim, h, bias=bias, device=device)

    def _project(self, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = self.config
        if c.fused_qkv:
            return self.query_key_value(y).split([c.q_dim, c.kv_dim, c.kv_dim], dim=-1)
        return self.q_proj(y), self.k_proj(y), self.v_proj(y)

    def forward(self, y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        c = self.config
        b, t, _ = y.shape
        q, k, v = self._project(y)
        # Rotated in the (B, T, heads, hd) layout, then transposed: q and k keep the layout
        # the projections give them (as a full rotation's elementwise ops keep it), so SDPA's
        # output is in it too and the output projection reads a view, not a copy.
        if c.litgpt:  # LitGPT: transposed, then rotated and concatenated: q head-major
            return self.dense(self._litgpt(q, k, v, cos, sin).transpose(1, 2).reshape(b, t, -1))
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = _partial_rotate(q.view(b, t, c.heads, c.head_dim), cos, sin, c.rotary)
        k = _partial_rotate(k.view(b, t, c.n_kv_heads, c.head_dim), cos, sin, c.rotary)
        v = v.view(b, t, c.n_kv_heads, c.head_dim)
        a = _attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), c, self.training)
        return self.dense(a.transpose(1, 2).reshape(b, t, -1))

    def _litgpt(self, q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """LitGPT's CausalSelfAttention (litgpt/model.py at 00af8b0): the heads transposed out
        of the fused output (views), the leading dims rotated by ``apply_rope`` and ``torch.cat``
        with the rest (new, head-major tensors), SDPA's output transposed back: the output
        projection's ``reshape`` copies it."""
        c = self.config
        b, t = q.shape[:2]
        q = _partial_rotate(q.view(b, t, c.heads, c.head_dim).transpose(1, 2), cos, sin, c.rotary)
        k = k.view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        k = _partial_rotate(k, cos, sin, c.rotary)
        v = v.view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        return _attend(q, k, v, c, self.training)


def _partial_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, r: int) -> torch.Tensor:
    if r == x.size(-1):
        return _rotate(x, cos, sin)
    return torch.cat((_rotate(x[..., :r], cos, sin), x[..., r:]), dim=-1)


class _Block(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h = c.hidden
        self.config = c
        self.input_layernorm = nn.LayerNorm(h, eps=c.norm_eps, device=device)
        if c.residual != "parallel_one_norm":
            self.post_attention_layernorm = nn.LayerNorm(h, eps=c.norm_eps, device=device)
        self.attention = _Attention(c, device)
        self.fc_in = nn.Linear(h, c.ffn, bias=c.linear_bias, device=device)
        self.fc_out = nn.Linear(c.ffn, h, bias=c.linear_bias, device=device)

    def _mlp(self, y: torch.Tensor) -> torch.Tensor:
        gelu = F.gelu(self.fc_in(y), approximate="tanh" if self.config.gelu == "tanh" else "none")
        return _dropout(self.fc_out(gelu), self.config.dropout, self.training)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        c = self.config
        y = self.input_layernorm(x)
        a = _dropout(self.attention(y, cos, sin), c.dropout, self.training)
        if c.residual == "sequential":
            x = x + a
            return x + self._mlp(self.post_attention_layernorm(x))
        if c.residual == "parallel":
            y = self.post_attention_layernorm(x)
        return x + a + self._mlp(y)


class NeoX(BlocksLM):
    """A GPT-NeoX-kind causal LM from a Hugging Face config's shape (``model(idx, targets)``)."""

    def __init__(self, config: WorkloadConfig, device: Device = None) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.embed_in = nn.Embedding(config.vocab, h, device=device)
        self.layers = nn.ModuleList(_Block(config, device) for _ in range(config.layers))
        self.final_layer_norm = nn.LayerNorm(h, eps=config.norm_eps, device=device)
        self.embed_out = nn.Linear(h, config.vocab, bias=config.head_bias, device=device)
        if config.tied_embeddings:
            self.embed_out.weight = self.embed_in.weight

    def _rope(
        self, t: int, device: Device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.config.rotary
        inv = 1.0 / (self.config.rope_theta ** (torch.arange(0, r, 2, device=device).float() / r))
        freqs = torch.outer(torch.arange(t, device=device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        c = self.config
        x = self.embed_in(idx)
        cos, sin = self._rope(idx.size(1), idx.device, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        last = [x]
        del x  # head_loss holds the last block's output as long as the loss does
        return head_loss(c, self.embed_out, self.final_layer_norm, last, targets)


__all__ = ["NeoX"]
