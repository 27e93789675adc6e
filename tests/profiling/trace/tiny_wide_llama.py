"""A Llama-kind decoder whose MLP is wide next to its vocabulary (h 256, f 1024, V 256) trained
on 16 tokens: the last block's MLP, not the loss, holds the step's peak (the LoRA tests
of the optimizer step build it from a config.json)."""

from __future__ import annotations

import json
from pathlib import Path

from profiling.config import TrainingConfig

WIDE = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": False,
}  # fmt: skip


def wide_lora(
    tmp_path: Path, precision: str, targets: str, dropout: float = 0.0, **kw: object
) -> TrainingConfig:
    """LoRA of rank 8 on the wide decoder, 16 tokens, batch 1."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(WIDE), encoding="utf-8")
    return TrainingConfig(
        model=f"hf:{path}", seq=16, batch=1, precision=precision, lora_rank=8,
        lora_targets=targets, lora_dropout=dropout, **kw,
    )  # fmt: skip
