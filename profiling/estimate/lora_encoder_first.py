"""The first block of an encoder (BERT, RoBERTa, ViT) under LoRA: what it keeps less than the
blocks above it. The embeddings are frozen, so no gradient reaches the first block's input;
autograd keeps nothing for the ops before the block's first adapted projection, and at that
projection neither the frozen base's weight copy nor lora_A's (their inputs need no gradient;
lora_B's input, lora_A's output, does).

Read from the trace's saved tensors, block 0 against block 1, in four stages of a block, each
what the blocks above keep for it (T = s·b tokens, hidden h, MLP width f):

- attention (q, k, v): SDPA's q, k, v, output and logsumexp and the kernel's seed and offset —
  less its output where an o adapter keeps that very tensor (no copy of its own) — and under
  autocast q's, k's and v's 16-bit weight copies;
- o: its weight copy, and the LayerNorm over its residual sum (BERT's attention output
  LayerNorm, ViT's second) — its input and statistics;
- up: its weight copy, GELU's input;
- down: its weight copy.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, _cuda, _lse
from profiling.estimate.lora_bytes import own_copies

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

STAGES = (("q", "k", "v"), ("o",), ("up",), ("down",))


def first_roles(cfg: TrainingConfig) -> list[str]:
    """The roles adapted in the first block's first adapted stage (q, k, v; o; up; or down)."""
    for stage in STAGES:
        roles = [t for t in cfg.lora_targets if t in stage]
        if roles:
            return roles
    return []


def cached_a(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """Under autocast, the first stage's lora_A 16-bit weight copies: nothing saves them, but
    autocast caches them (trained leaves) until forward ends. (bytes, formula)"""
    roles, r = first_roles(cfg), int(cfg.lora_rank or 0)
    width = d.f if roles == ["down"] else d.h
    w = "f" if roles == ["down"] else "h"
    return len(roles) * r * width * 2, f"{len(roles)}·r·{w}·2"


def not_kept(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """What the first block keeps less than the others: the stages before its first adapted
    one, and there the weight copies under autocast. (bytes, formula)"""
    T, h, f = d.s * d.b, d.h, d.f
    roles = first_roles(cfg)
    stage = next(i for i, s in enumerate(STAGES) if roles[0] in s)
    value, parts = 0, []
    if stage > 0:  # SDPA's saved tensors (encoder.per_layer's attention term)
        lse, _ = _lse(d, e, cfg)
        rng = (16 if e.c == 4 else 24) if _cuda(cfg) else 0
        value += T * 4 * d.h * e.c + lse + rng
        parts.append(f"SDPA's s·b·4h·{e.c} + 4·a·b·s + {rng}")
        if "o" in cfg.lora_targets and not own_copies(cfg, e):  # o's lora_A keeps its output
            value -= T * h * e.c
            parts[-1] += f" − its output o's adapter keeps s·b·h·{e.c}"
    if stage > 1:  # the LayerNorm over o's residual sum
        stats = 8 if _cuda(cfg) else 2 * e.r
        value += T * (h * e.r + stats)
        parts.append(f"the LayerNorm after attention s·b·(h·{e.r} + {stats})")
    if stage > 2:
        value += T * f * e.c
        parts.append(f"GELU's input s·b·f·{e.c}")
    if e.amp:  # the 16-bit weight copies up to and at the first adapted stage
        widths = [3 * h * h, h * h, h * f, f * h][: stage + 1]
        value += sum(widths) * 2 + cached_a(d, cfg)[0]
        names = ["3h²", "h²", "h·f", "f·h"][: stage + 1]
        parts.append(f"weight copies ({' + '.join(names)})·2 + lora_A's {cached_a(d, cfg)[1]}")
    return value, " + ".join(parts)


__all__ = ["STAGES", "cached_a", "first_roles", "not_kept"]
