"""transformers' module traced with 1-3 layers and scaled to its own count holds what all its
layers traced hold, where the backward's highest moment changes past the samples: the lowest
layer's backward (every gradient made above it) outgrows the head's (every layer's saved
input beside the logits' gradients) where fp32 gradients outweigh checkpointed layers' inputs,
and overtakes it past 4 layers here (the first step's; 7, the steady step's). A line through
the samples read the 12-layer backward low; now the fit sees it and every layer is traced.
Where the head's moment keeps the lead the fit is still used (``test_hf_module_estimate``'s
layer-scaled cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed")

from profiling.config import TrainingConfig
from profiling.trace.step import trace_step

# a small vocabulary: the head's moment leads 1-3 layers by a few MB, not by dozens
LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 128,
         "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 512}  # fmt: skip


def _cfg(tmp_path: Path, layers: int, **settings: object) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "num_hidden_layers": layers}), encoding="utf-8")
    return TrainingConfig(model=f"hf:{path}", seq=512, batch=1, precision="fp32",
                          checkpointing="full", **settings)  # fmt: skip


def test_a_backward_overtaken_past_the_samples_is_traced_whole(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, 12, optimizer="sgd")  # SGD: the backward is the step's peak
    scaled = trace_step(cfg, block_scaling=True)
    full = trace_step(cfg, block_scaling=False)
    assert scaled.phase_peaks["backward"] == full.phase_peaks["backward"]
    assert scaled.peak_bytes == full.peak_bytes
    skip = {"wall_seconds", "notes"}
    assert scaled.model_dump(exclude=skip) == full.model_dump(exclude=skip)
    assert any("every block traced" in n for n in scaled.notes), scaled.notes
