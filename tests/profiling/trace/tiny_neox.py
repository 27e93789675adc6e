"""The tiny GPT-NeoX-kind decoders (GPT-NeoX/Pythia, Phi, Falcon, BLOOM) the NeoX tests build
from a config.json: one of two shapes, each kind's own fields on top."""

from __future__ import annotations

import json
from pathlib import Path

# V 512 beside h 64, f 160: the loss leads
BASE = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512,
}  # fmt: skip
# a vocabulary small beside the blocks (V 128; h 128, f 512): the last block's MLP leads
SMALL = {**BASE, "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512}
# wide next to its tokens (h 256, f 1024, V 256; 16 tokens): the adapters' own moments lead
WIDE = {**BASE, "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024}
KINDS = {
    "gpt_neox": {"model_type": "gpt_neox", "rotary_pct": 0.25},  # parallel, two norms
    "gpt_neox sequential": {"model_type": "gpt_neox", "use_parallel_residual": False},
    "phi": {"model_type": "phi", "partial_rotary_factor": 0.5},  # q, k, v apart
    "falcon-7b": {"model_type": "falcon"},  # multi-query: unequal q/k/v slices
    "falcon-40b": {  # grouped, two norms
        "model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 2,
    },
    "bloom": {"model_type": "bloom", "n_layer": 2, "n_head": 4},  # its names (hidden_size wins)
}  # fmt: skip


def neox_spec(tmp_path: Path, kind: str, shape: dict | None = None) -> str:
    """``hf:PATH`` of the tiny ``kind`` (``shape``: BASE unless given), written under
    ``tmp_path``."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**(shape or BASE), **KINDS[kind]}), encoding="utf-8")
    return f"hf:{path}"
