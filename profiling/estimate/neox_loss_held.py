"""What the loss-forward moment of LoRA under autocast on transformers' GPT-NeoX kinds of
decoder (GPT-NeoX/Pythia, Phi, Falcon, BLOOM) holds beside the loss's logits, read off the
trace's allocations in order (``lora_neox_amp`` counts what stays kept). No torch here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.lora_neox_amp import adapters, first_block_reads
from profiling.estimate.selective import blocks_keep_saved

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def loss_held(d: Dims, cfg: TrainingConfig) -> Term | None:
    """LoRA under autocast on transformers' modules: their loss runs inside the model's forward
    (``ForCausalLMLoss``), which still holds the final LayerNorm's fp32 output (the LM head's
    matmul saved its 16-bit copy, not it), while autocast's cache still holds the first block's
    A copies nothing saved (``first_block_copies``) until autocast exits after the loss — both
    beside the loss's logits, then freed (the trace: 28,672 B at h 256, 16 tokens, q, k, v).
    With checkpointing the cache's copies are ``activations.autocast_cache``'s (not here). Full
    training holds the fp32 output too (GPT-NeoX, Falcon: 0.987-0.989 of the trace without it,
    the loss's forward the peak, h 128, f 512, V 128, seq 256 × 2)."""
    amp = Bytes.of(cfg.precision).amp
    if not amp or not blocks_keep_saved(cfg) or not d.extra.get("hf_module"):
        return None
    if cfg.lora_rank is None:  # full training: the trained head saved its own 16-bit copy too
        return Term("the final LayerNorm's fp32 output, which the forward holds",
                    d.s * d.b * d.h * 4, "s·b·h·4 B", f"{d.s}·{d.b}·{d.h}·4")  # fmt: skip
    reading = first_block_reads(d, cfg)
    a = sum(w * r for n, w, r in adapters(d, cfg) if n in reading)
    return Term("the final LayerNorm's fp32 output, which the forward holds, and autocast's "
                "cached copies of the first block's A weights", d.s * d.b * d.h * 4 + 2 * a,
                "s·b·h·4 + A·2 B", f"{d.s}·{d.b}·{d.h}·4 + {a}·2")  # fmt: skip


__all__ = ["loss_held"]
