"""What the loss-forward moment under autocast on transformers' Llama-kind modules (Llama,
Mistral) holds beside the loss's logits, read off the trace's allocations in order, as
``estimate.neox_loss_held`` counts GPT-NeoX's kinds'. No torch here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.selective import blocks_keep_saved

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_FIRST = ("q", "k", "v")  # the first block's layers reading the frozen embedding's norm


def loss_held(d: Dims, cfg: TrainingConfig) -> Term | None:
    """Under autocast transformers' loss runs inside the model's forward (``ForCausalLMLoss``),
    which still holds the final RMSNorm's output, fp32 (the LM head's matmul saved its 16-bit
    copy, not it), and under LoRA autocast's cache still holds the first block's q, k, v A
    copies, which nothing saved (their input needs no gradient; the cache keeps only casts of
    leaves that need one, so not the frozen weights'), until autocast exits after the loss —
    both beside the loss's logits, then freed (the trace: 16,384 + 2·4,096 B at h 256, 16
    tokens, r 8 on q, v; 0.9987 of the trace before). Our blocks' loss runs after their
    forward returns, its final norm's output gone, but still inside autocast: the cached A
    copies only (wide toy, all-linear: the loss forward 0.99971 of the trace before, -12,288 B
    at q, k, v). Not for DoRA (its own moments). Under full checkpointing the final norm runs
    outside every checkpoint, so its output is held as without (llama-base amp-bf16 64 × 2 full
    checkpointing: the loss forward, the peak, −32,768 B = s·b·h·4 below the trace, D66);
    the autocast cache is the loss-forward moment's own term there (``step_moments``: every
    trained weight's copy), so the A copies are not counted again."""
    if not Bytes.of(cfg.precision).amp or cfg.dora:
        return None
    ours = not d.extra  # our blocks (no transformers' module, no variant)
    if d.extra.get("hf_module") not in ("llama", "mistral") and not ours:
        return None
    T, h = d.s * d.b, d.h
    if not blocks_keep_saved(cfg):
        if ours or cfg.checkpointing != "full":
            return None
        return Term("the final RMSNorm's fp32 output, which the forward holds", T * h * 4,
                    "s·b·h·4 B", f"{d.s}·{d.b}·{h}·4")  # fmt: skip
    first = _first(cfg)
    a = first_a(d, cfg)
    copies = f"autocast's cached copies of the first block's A weights ({len(first)})"
    if ours:
        return Term(copies, 2 * a, "A·2 B", f"{a}·2") if first else None
    name = "the final RMSNorm's fp32 output, which the forward holds"
    if first:
        name += f", and {copies}"
    return Term(name, T * h * 4 + 2 * a, "s·b·h·4 + A·2 B", f"{d.s}·{d.b}·{h}·4 + {a}·2")


def _first(cfg: TrainingConfig) -> list[str]:
    return [t for t in _FIRST if cfg.lora_rank is not None and t in cfg.lora_targets]


def first_a(d: Dims, cfg: TrainingConfig) -> int:
    """The elements of the first block's adapted q, k, v A weights (``loss_held``'s copies)."""
    return len(_first(cfg)) * int(cfg.lora_rank or 0) * d.h


__all__ = ["first_a", "loss_held"]
