"""A T5 full finetune without autocast, checkpointing or dropout where the decoder's tokens
lead (32 → 24 tokens × 2): the first decoder block's MLP going back, at gelu_new, beside the
whole encoder's kept tensors, every decoder block above gone back, and what waits for the
blocks below (the encoder output's gradient from cross-attention's k and v, the position
bias's, one residual gradient per block above the second). The estimate had the last decoder
block or the encoder's only: −77,600 B (0.995) with 2 or 4 encoder blocks, −102,176 (0.995) with
4 decoder blocks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_last_mlp import FIRST
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_last_mlp import _T5


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [_T5, {**_T5, "num_layers": 4}, {**_T5, "num_decoder_layers": 4}],
    ids=["2-3", "4-3", "2-4"],
)
def test_the_first_decoder_block_s_mlp_going_back(tmp_path, model) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=2, precision="fp32",
        checkpointing="none", optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == FIRST
    assert est.per_gpu_bytes == traced.peak_bytes
