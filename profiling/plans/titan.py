"""torchtitan's Llama 3, as a plan's trace builds it: one pipeline stage of it at a time.

The model of ``torchtitan/models/llama/model.py`` at the commit of torchtitan's published
4-D benchmarks (9dec370, December 2024): ``tok_embeddings``, ``layers`` (a ModuleDict keyed by
the layer's index, so a stage keeps only its own), ``norm``, ``output``; each block an
``attention_norm`` + ``attention`` (``wq wk wv wo``; rotary embeddings applied through complex
``freqs_cis``, grouped-query keys and values repeated to every head, SDPA) and an
``ffn_norm`` + ``feed_forward`` (SwiGLU: ``w1 w2 w3``), norms ``nn.RMSNorm``. A stage that
lacks a part has ``None`` in its place, as torchtitan's ``pipeline_module_split`` leaves it.

Built from a :class:`~profiling.models.config.WorkloadConfig` of the Llama family without its
variations (a plan refuses the others in one sentence). Imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from profiling.models.config import WorkloadConfig


def precompute_freqs_cis(dim: int, end: int, theta: float) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(
    xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    seqlen = xq_.shape[1]
    freqs = freqs_cis[0:seqlen].view(1, seqlen, 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        torch.unsqueeze(x, dim=3)
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    def __init__(self, c: WorkloadConfig) -> None:
        super().__init__()
        self.n_rep = c.heads // c.n_kv_heads
        self.head_dim = c.head_dim
        self.wq = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.hidden, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.hidden, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
        self.ulysses: Any = None  # DeepSpeed-Ulysses' all-to-alls (profiling.plans.ulysses)
        self.ring: Any = None  # context parallelism's ring attention (profiling.plans.ring)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        # -1 heads: tensor parallelism leaves each rank its own share of them
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        n_rep = self.n_rep
        if self.ulysses is not None:  # the whole sequence, 1/N of the heads
            xq = self.ulysses.to_heads(xq)
            xk, xv = self.ulysses.kv_to_heads(xk), self.ulysses.kv_to_heads(xv)
            n_rep = xq.shape[2] // xk.shape[2]  # one key/value head each when replicated
        keys, values = repeat_kv(xk, n_rep), repeat_kv(xv, n_rep)
        q, k, v = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        if self.ring is not None:  # the whole sequence's keys and values, around the cp ring
            out = self.ring.attend(q, k, v).transpose(1, 2)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        if self.ulysses is not None:  # this rank's tokens back, every head
            out = self.ulysses.to_sequence(out)
        return self.wo(out.contiguous().view(bs, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, c: WorkloadConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(c.hidden, c.ffn, bias=False)
        self.w2 = nn.Linear(c.ffn, c.hidden, bias=False)
        self.w3 = nn.Linear(c.hidden, c.ffn, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, c: WorkloadConfig) -> None:
        super().__init__()
        self.attention = Attention(c)
        self.feed_forward = FeedForward(c)
        self.attention_norm = nn.RMSNorm(c.hidden, eps=c.norm_eps)
        self.ffn_norm = nn.RMSNorm(c.hidden, eps=c.norm_eps)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """One stage of the model: ``layers`` of its blocks, the embedding and the head if it has
    them. ``forward(tokens or hidden states) -> logits or hidden states``."""

    def __init__(
        self, c: WorkloadConfig, layers: int, embedding: bool, head: bool, seq: int
    ) -> None:
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab, c.hidden) if embedding else None
        self.layers = nn.ModuleDict({str(i): TransformerBlock(c) for i in range(layers)})
        self.norm = nn.RMSNorm(c.hidden, eps=c.norm_eps) if head else None
        self.output = nn.Linear(c.hidden, c.vocab, bias=False) if head else None
        # torchtitan keeps the table for twice the model's length, as a persistent buffer
        self.register_buffer(
            "freqs_cis", precompute_freqs_cis(c.head_dim, seq * 2, c.rope_theta), persistent=True
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.tok_embeddings is not None:
            h = self.tok_embeddings(h)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        if self.norm is not None:
            h = self.norm(h)
        if self.output is not None:
            h = self.output(h)
        return h


def cross_entropy(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """torchtitan's loss (``torchtitan/components/loss.py``): logits upcast to fp32."""
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


__all__ = ["Transformer", "cross_entropy"]
