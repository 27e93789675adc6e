"""A BERT classifier without checkpointing on few tokens next to its MLP's weights: the MLP's
input projection going back (``intermediate.dense``), at the first block where every block
above has gone back, holds the step's peak, not GELU's backward in the last block (the
estimate's highest backward moment): bert-wide fp32 with 8-bit Adam read 0.951 of the trace
(−909,848 B); now counted (profiling.estimate.encoder_first) and equal to the byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import encoder_first
from profiling.estimate.memory import estimate

pytest.importorskip("transformers", reason="the hf extra is not installed")

BERT = {
    "model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": 256,
    "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 130,
}  # fmt: skip
SMALL = {**BERT, "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512}
# (config, fields, the moment): the old ratio in the comment
CASES = {
    "wide fp32 adam8bit": (BERT, {}, encoder_first.FIRST_INPUT),  # 0.951
    "wide bf16 adam8bit": (BERT, {"precision": "bf16"}, encoder_first.FIRST_INPUT),
    "wide fp32 cpu": (BERT, {"target": "cpu"}, encoder_first.FIRST_INPUT),
    "small fp32 adam8bit": (SMALL, {}, encoder_first.LAST_INPUT),
    "small mixed adam8bit": (SMALL, {"precision": "mixed"}, encoder_first.LAST_INPUT),
}


def estimate_and_trace(config: dict, fields: dict, tmp_path: Path) -> tuple:
    """The estimate and the trace of the encoder ``config`` (64 × 2, 8-bit Adam unless
    ``fields`` says otherwise)."""
    from profiling.trace.step import trace_step

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    values = {"model": f"hf:{path}", "seq": 64, "batch": 2, "optimizer": "adam8bit", **fields}
    cfg = TrainingConfig.parse(style="field", **values)
    return estimate(cfg), trace_step(cfg)


@pytest.mark.parametrize("case", list(CASES))
def test_the_mlps_input_projection_going_back_equals_the_trace(case: str, tmp_path: Path) -> None:
    config, fields, moment = CASES[case]
    est, traced = estimate_and_trace(config, fields, tmp_path)
    assert est.peak_moment == moment
    assert est.per_gpu_bytes == traced.peak_bytes, est.per_gpu_bytes - traced.peak_bytes
