"""Llama's kind trained whole in bf16, small vocabulary: the first block's input RMSNorm going
back (every other gradient made, its fp32 temporaries) holds the step's peak — the estimate had
no such moment (0.987 of the trace on the toy below, tied; found shrinking audit4's D51)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.llama_first_norm import NAME
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

_LLAMA = {
    "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
def test_the_first_block_s_input_norm_going_back(tmp_path, tied) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_LLAMA, "tie_word_embeddings": tied}))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=16, batch=2, precision="bf16", optimizer="sgd",
        checkpointing="none",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    peak = max(est.moments, key=lambda m: m.bytes)
    assert peak.name == NAME
    assert peak.bytes == traced.peak_bytes
