"""The tiny Llama-kind decoders the Llama tests build from a config.json: one base and the
shapes made from it (a vocabulary small beside the blocks, an MLP wide next to it), and LoRA on
the wide one."""

from __future__ import annotations

import json
from pathlib import Path

from profiling.config import TrainingConfig

# V 512 beside h 64, f 160, tied: the loss leads
LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
# a vocabulary small beside the blocks (V 128; h 128, f 512), untied: the last block's MLP, its
# neighbouring matrices in the optimizer step, not the loss or the embedding, decide the peak
SMALL_VOCAB = {**LLAMA, "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512,
               "tie_word_embeddings": False}  # fmt: skip
# an MLP wide next to the vocabulary (h 256, f 1024, V 256): on 16 tokens the last block's MLP
WIDE = {**SMALL_VOCAB, "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024}


def llama_spec(tmp_path: Path, shape: dict | None = None) -> str:
    """``hf:PATH`` of the decoder of ``shape`` (LLAMA unless given), written under ``tmp_path``."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shape or LLAMA), encoding="utf-8")
    return f"hf:{path}"


def wide_lora(
    tmp_path: Path, precision: str, targets: str, dropout: float = 0.0, **kw: object
) -> TrainingConfig:
    """LoRA of rank 8 on the wide decoder, 16 tokens, batch 1."""
    return TrainingConfig(
        model=llama_spec(tmp_path, WIDE), seq=16, batch=1, precision=precision, lora_rank=8,
        lora_targets=targets, lora_dropout=dropout, **kw,
    )  # fmt: skip
