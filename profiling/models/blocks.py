"""The reference models in pure torch (imported lazily by ``workloads.build_model``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.types import Device

from profiling.models.config import WorkloadConfig


def head_loss(
    c: WorkloadConfig,
    head: nn.Module,
    norm: nn.Module,
    last: list[torch.Tensor],
    targets: torch.Tensor | None,
    softcap: float | None = None,
) -> torch.Tensor:
    """The logits (no targets), or the loss ``c.loss`` computes from the final norm's output.

    ``last`` holds the last block's output alone (the caller keeps no other reference): the
    reference loss holds it to its end, as our blocks always have; another stack's loss lets it
    go once the final norm has run, as LitGPT, torchtune and transformers rebind it to the norm's
    output (what the norm saved of it stays)."""
    if targets is None or c.loss == "cross-entropy":
        logits = head(norm(last[0]))  # the norm's output lives only through the head
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        return logits if targets is None else _lm_loss(logits, targets)
    from profiling.models.losses import lm_loss

    cuda = c.target == "cuda"
    return lm_loss(c.loss, head, lambda: norm(last.pop()), targets, c.loss_chunks, softcap, cuda,
                   c.compile_loss)  # fmt: skip


def _lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    # Upcast to fp32 for a stable softmax, as training code does: at seq·batch·vocab values
    # this copy is often the largest single activation of a small model.
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    # Only when it drops something: F.dropout(p=0) still makes a copy and a mask.
    return F.dropout(x, p, training) if p and training else x


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, c: WorkloadConfig, training: bool
) -> torch.Tensor:
    """Causal attention over (B, heads, T, hd) queries and (B, kv_heads, T, hd) keys/values."""
    gqa = k.size(1) != q.size(1)
    if c.attention == "sdpa":
        # Fused attention. With dropout, CUDA's flash kernel regenerates the mask from the RNG
        # state in backward (nothing s²-sized is kept), so the kernel runs without it here: on
        # the CPU, SDPA with dropout would fall back to the math path and keep the scores.
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    if gqa:  # eager attention repeats the key/value heads, as Hugging Face's repeat_kv does
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    t = q.size(-2)
    scores = (q @ k.transpose(-2, -1)) * (q.size(-1) ** -0.5)
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    probs = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
    return _dropout(probs, c.dropout, training) @ v


class BlocksLM(nn.Module):
    """A model of our own blocks: ``model(idx, targets)`` and ``example_inputs``."""

    config: WorkloadConfig

    def example_inputs(
        self, batch: int, seq: int, device: Device = None
    ) -> tuple[torch.Tensor, ...]:
        """Token ids and next-token targets of shape (batch, seq)."""
        vocab = self.config.vocab
        idx = torch.randint(0, vocab, (batch, seq), device=device)
        targets = torch.randint(0, vocab, (batch, seq), device=device)
        return idx, targets


class _GPT2Block(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h = c.hidden
        self.config = c
        self.heads = c.heads
        self.ln_1 = nn.LayerNorm(h, device=device)
        self.c_attn = nn.Linear(h, 3 * h, device=device)
        self.c_proj = nn.Linear(h, h, device=device)
        self.ln_2 = nn.LayerNorm(h, device=device)
        self.c_fc = nn.Linear(h, c.ffn, device=device)
        self.mlp_proj = nn.Linear(c.ffn, h, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        # (B, nh, T, hs)
        q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        y = _attend(q, k, v, self.config, self.training)
        p = self.config.dropout
        x = x + _dropout(self.c_proj(y.transpose(1, 2).reshape(b, t, h)), p, self.training)
        mlp = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + _dropout(mlp, p, self.training)


class GPT2(BlocksLM):
    def __init__(self, config: WorkloadConfig, device: Device = None) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.wte = nn.Embedding(config.vocab, h, device=device)
        self.wpe = nn.Embedding(config.max_seq, h, device=device)
        self.h = nn.ModuleList(_GPT2Block(config, device) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(h, device=device)
        self.lm_head = nn.Linear(h, config.vocab, bias=False, device=device)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        t = idx.size(1)
        if t > self.config.max_seq:
            raise ValueError(f"sequence length {t} exceeds the model's {self.config.max_seq}")
        pos = torch.arange(t, device=idx.device)
        x = _dropout(self.wte(idx) + self.wpe(pos), self.config.dropout, self.training)
        for block in self.h:
            x = block(x)
        last = [x]
        del x  # head_loss holds the last block's output as long as the loss does
        return head_loss(self.config, self.lm_head, self.ln_f, last, targets)


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, device: Device, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class _LlamaBlock(nn.Module):
    def __init__(self, c: WorkloadConfig, device: Device) -> None:
        super().__init__()
        h, hd = c.hidden, c.head_dim
        self.config = c
        self.heads, self.kv_heads, self.head_dim = c.heads, c.n_kv_heads, hd
        self.input_layernorm = _RMSNorm(h, device)
        self.q_proj = nn.Linear(h, c.heads * hd, bias=False, device=device)
        self.k_proj = nn.Linear(h, c.n_kv_heads * hd, bias=False, device=device)
        self.v_proj = nn.Linear(h, c.n_kv_heads * hd, bias=False, device=device)
        self.o_proj = nn.Linear(c.heads * hd, h, bias=False, device=device)
        self.post_attention_layernorm = _RMSNorm(h, device)
        self.gate_proj = nn.Linear(h, c.ffn, bias=False, device=device)
        self.up_proj = nn.Linear(h, c.ffn, bias=False, device=device)
        self.down_proj = nn.Linear(c.ffn, h, bias=False, device=device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        y = self.input_layernorm(x)
        # (B, nh, T, hd)
        q = self.q_proj(y).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(y).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(y).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        a = _attend(q, k, v, self.config, self.training)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, -1))
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(BlocksLM):
    def __init__(self, config: WorkloadConfig, device: Device = None) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden, device=device)
        self.layers = nn.ModuleList(_LlamaBlock(config, device) for _ in range(config.layers))
        self.norm = _RMSNorm(config.hidden, device)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False, device=device)

    def _rope(
        self, t: int, device: Device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hd = self.config.head_dim
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=device).float() / hd))
        freqs = torch.outer(torch.arange(t, device=device).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        # In the activations' dtype (as Hugging Face's Llama does): 16-bit models stay 16-bit.
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed_tokens(idx)
        cos, sin = self._rope(idx.size(1), idx.device, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        last = [x]
        del x  # head_loss holds the last block's output as long as the loss does
        return head_loss(self.config, self.lm_head, self.norm, last, targets)
