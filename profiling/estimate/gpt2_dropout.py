"""Our GPT-2's embeddings' dropout: ``drop(wte(idx) + wpe(pos))`` (profiling/models/blocks.py
``GPT.forward``) keeps its mask for backward where the embeddings train, with or without full
checkpointing (the blocks' checkpoints start after it). No torch here; nothing of
``profiling.estimate.activations`` imported (it calls this)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def embedding_mask(cfg: TrainingConfig, arch: str, hf_module: object, residual: int) -> int:
    """Bytes per element of the mask (0: none without ``--dropout``, under LoRA, where the
    frozen embeddings need no gradient, or on transformers' modules, which
    ``hf_ops.once_per_model`` counts): 1 on CUDA, the residual's dtype (``residual`` bytes) on
    the CPU. Missed before: tiny-gpt2 --dropout 0.1, mixed, 128 × 2 read −16,384 B (0.997;
    0.996 fully checkpointed)."""
    if not cfg.dropout or arch != "gpt2" or hf_module or cfg.lora_rank:
        return 0
    return 1 if getattr(cfg, "target", "cuda") == "cuda" else residual


__all__ = ["embedding_mask"]
