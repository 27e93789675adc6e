"""Our own blocks for the Llama family's variations, built from a Hugging Face config's shape.

Used when ``transformers`` is not installed (or cannot build the model under fake tensors):
RMSNorm, RoPE, grouped-query attention and SwiGLU as ``blocks.Llama`` has them, plus the
variations a :class:`WorkloadConfig` names — an explicit head size, q/k/v biases (Qwen2), q/k
norms per head (Qwen3) or over the whole projection (OLMo 2, OLMoE), norms after each sublayer
(OLMo 2) or on both sides (Gemma 2), GeGLU with scaled, tied embeddings and a soft-capped LM head
(Gemma), sliding-window attention, and a mixture of experts with top-k routing.

The experts' tokens: fake tensors carry no values, so which expert a token picks is unknowable.
The blocks route for real (router, softmax, top-k, a sort of the choices) and then assume
**balanced routing**: each expert takes ⌈k·T/E⌉ slots (capacity factor 1), run as one batched
matmul over all experts (a grouped GEMM, as production MoE kernels do). Every expert's
parameters, gradients and optimizer state exist; the activations are those of the k·T routed
tokens. A real batch routes unevenly: the busiest expert's share decides its peak.

Imported lazily by ``workloads.build_model``: imports torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.types import Device

from profiling.models.blocks import BlocksLM, _attend, _RMSNorm, _rotate, head_loss
from profiling.models.config import WorkloadConfig


def _act(c: WorkloadConfig, x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") if c.mlp == "geglu" else F.silu(x)


class _MLP(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device, width: int | None = None) -> None:
        super().__init__()
        h, f = c.hidden, width or c.ffn
        self.config = c
        self.gate_proj = nn.Linear(h, f, bias=False, device=device)
        self.up_proj = nn.Linear(h, f, bias=False, device=device)
        self.down_proj = nn.Linear(f, h, bias=False, device=device)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.down_proj(_act(self.config, self.gate_proj(y)) * self.up_proj(y))


class _Experts(nn.Module):
    """Top-k routing over E experts, each a gated MLP; balanced capacity (see the module doc)."""

    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h, f, e = c.hidden, c.mlp_ffn, c.experts
        self.config = c
        self.router = nn.Linear(h, e, bias=False, device=device)
        bound = 1 / math.sqrt(h)
        self.gate = nn.Parameter(torch.empty(e, f, h, device=device).uniform_(-bound, bound))
        self.up = nn.Parameter(torch.empty(e, f, h, device=device).uniform_(-bound, bound))
        self.down = nn.Parameter(torch.empty(e, h, f, device=device).uniform_(-bound, bound))
        if c.shared_experts:  # DeepSeek: experts every token runs, as one wider MLP
            self.shared_experts = _MLP(c, device, f * c.shared_experts)

    def project(self, x: torch.Tensor, which: str) -> torch.Tensor:
        """Every expert's matmul at once, x (E, slots, in) by its stacked weight (a grouped
        GEMM); QLoRA's trace puts 4-bit weights behind it (``trace.nf4.quantize_experts``)."""
        return torch.bmm(x, getattr(self, which).transpose(1, 2))

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        c = self.config
        shape, h, e, k = y.shape, c.hidden, c.experts, c.experts_per_token
        x = y.reshape(-1, h)
        tokens = x.size(0)
        probs = F.softmax(self.router(x), dim=-1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        order = chosen.reshape(-1).argsort()  # the slots, grouped by expert
        token = order // k
        slots = tokens * k
        capacity = math.ceil(slots * c.capacity_factor / e)
        routed = x[token]
        if capacity * e != slots:
            routed = F.pad(routed, (0, 0, 0, capacity * e - slots))
        xe = routed.view(e, capacity, h)
        hidden = _act(c, self.project(xe, "gate")) * self.project(xe, "up")
        out = self.project(hidden, "down").reshape(-1, h)[:slots]
        out = out * weights.reshape(-1)[order].unsqueeze(-1)
        routed = torch.zeros_like(x).index_add(0, token, out).view(shape)
        return routed + self.shared_experts(y) if c.shared_experts else routed


class _Attention(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h, hd = c.hidden, c.head_dim
        self.config = c
        self.q_proj = nn.Linear(h, c.q_dim, bias=c.qkv_bias, device=device)
        self.k_proj = nn.Linear(h, c.kv_dim, bias=c.qkv_bias, device=device)
        self.v_proj = nn.Linear(h, c.kv_dim, bias=c.qkv_bias, device=device)
        self.o_proj = nn.Linear(c.q_dim, h, bias=False, device=device)
        if c.qk_norm == "head":
            self.q_norm = _RMSNorm(hd, device, c.norm_eps)
            self.k_norm = _RMSNorm(hd, device, c.norm_eps)
        elif c.qk_norm == "full":
            self.q_norm = _RMSNorm(c.q_dim, device, c.norm_eps)
            self.k_norm = _RMSNorm(c.kv_dim, device, c.norm_eps)

    def forward(
        self, y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        c = self.config
        b, t, _ = y.shape
        q, k, v = self.q_proj(y), self.k_proj(y), self.v_proj(y)
        if c.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, c.heads, c.head_dim)
        k = k.view(b, t, c.n_kv_heads, c.head_dim)
        if c.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(b, t, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        a = _attend_windowed(q, k, v, c, self.training, mask)
        return self.o_proj(a.transpose(1, 2).reshape(b, t, -1))


def _attend_windowed(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    c: WorkloadConfig,
    training: bool,
    mask: torch.Tensor | None,
) -> torch.Tensor:
    if mask is None:
        return _attend(q, k, v, c, training)
    gqa = k.size(1) != q.size(1)
    if c.attention == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    if gqa:
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    scores = (q @ k.transpose(-2, -1)) * (q.size(-1) ** -0.5)
    probs = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    if c.dropout and training:
        probs = F.dropout(probs, c.dropout, training)
    return probs @ v


class _Block(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device, windowed: bool, dense: bool) -> None:
        super().__init__()
        h = c.hidden
        self.config = c
        self.windowed = windowed
        if c.mla:
            from profiling.models.mla import MLAttention

            self.self_attn: nn.Module = MLAttention(c, device)
        else:
            self.self_attn = _Attention(c, device)
        self.mlp = _Experts(c, device) if c.moe and not dense else _MLP(c, device)
        if c.norms != "post":
            self.input_layernorm = _RMSNorm(h, device, c.norm_eps)
        # Llama: the norm before the MLP; OLMo 2 and Gemma 2: after attention.
        self.post_attention_layernorm = _RMSNorm(h, device, c.norm_eps)
        if c.norms == "sandwich":
            self.pre_feedforward_layernorm = _RMSNorm(h, device, c.norm_eps)
        if c.norms != "pre":
            self.post_feedforward_layernorm = _RMSNorm(h, device, c.norm_eps)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        norms = self.config.norms
        mask = mask if self.windowed else None
        y = x if norms == "post" else self.input_layernorm(x)
        a = self.self_attn(y, cos, sin, mask)
        if norms == "pre":
            x = x + a
            return x + self.mlp(self.post_attention_layernorm(x))
        x = x + self.post_attention_layernorm(a)
        y = self.pre_feedforward_layernorm(x) if norms == "sandwich" else x
        return x + self.post_feedforward_layernorm(self.mlp(y))


def windowed_layers(c: WorkloadConfig) -> list[bool]:
    """Which layers attend through a sliding window (Gemma 2: the even ones)."""
    if c.sliding_window is None:
        return [False] * c.layers
    return [c.sliding_layers == "all" or i % 2 == 0 for i in range(c.layers)]


class HFLlama(BlocksLM):
    """A Llama-family causal LM from a Hugging Face config's shape (``model(idx, targets)``)."""

    def __init__(self, config: WorkloadConfig, device: Device = None) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.embed_tokens = nn.Embedding(config.vocab, h, device=device)
        self.layers = nn.ModuleList(
            _Block(config, device, w, i < config.dense_layers)
            for i, w in enumerate(windowed_layers(config))
        )
        self.norm = _RMSNorm(h, device, config.norm_eps)
        self.lm_head = nn.Linear(h, config.vocab, bias=False, device=device)
        if config.tied_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def _rope(
        self, t: int, device: Device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hd = self.config.head_dim
        base = self.config.rope_theta
        inv = 1.0 / (base ** (torch.arange(0, hd, 2, device=device).float() / hd))
        freqs = torch.outer(torch.arange(t, device=device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def _window_mask(self, t: int, device: Device) -> torch.Tensor | None:
        w = self.config.sliding_window
        if w is None or w >= t:
            return None  # the window covers the sequence: plain causal attention
        pos = torch.arange(t, device=device)
        dist = pos.unsqueeze(1) - pos.unsqueeze(0)
        return (dist >= 0) & (dist < w)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        c = self.config
        x = self.embed_tokens(idx)
        if c.embed_scale:
            x = x * torch.tensor(c.hidden**0.5, dtype=x.dtype)
        t = idx.size(1)
        cos, sin = self._rope(t, idx.device, x.dtype)
        mask = self._window_mask(t, idx.device)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        last = [x]
        del x  # head_loss holds the last block's output as long as the loss does
        return head_loss(c, self.lm_head, self.norm, last, targets, c.logit_softcap)


__all__ = ["HFLlama", "windowed_layers"]
