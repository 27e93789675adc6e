"""LoRA on T5 under autocast, small vocabulary (V 128 beside h 128, f 512): the last decoder
block's MLP going forward (the fp32 product, wo's 16-bit copy of it and its output at once)
holds the step's peak, and the loss's forward holds the encoder's fp32 output and the first
blocks' cached A copies — the estimate had neither (amp-bf16 q, v: −45,976 B, 0.995; t5-wide
at the loss −40,960 B). With wo adapted (down, all-linear) the moment was not counted at all:
amp-bf16 all-linear −13,208 B (0.9987) (without autocast: test_t5_forward_down)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_forward_amp import NAME
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_last_mlp import _T5  # the same toy T5

_WIDE = {**_T5, "vocab_size": 256, "d_model": 256, "d_ff": 1024}


_QV, _ALL = ["q", "v"], ["all-linear"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "precision", "target", "batch", "targets", "lora_dropout", "moment"),
    [
        (_T5, "amp-bf16", 24, 1, _QV, 0.0, NAME),
        (_T5, "amp-fp16", 16, 2, _QV, 0.0, NAME),
        (_WIDE, "amp-bf16", 24, 1, _QV, 0.0, "loss forward"),
        (_T5, "amp-bf16", 24, 1, _ALL, 0.0, NAME),
        (_T5, "amp-bf16", 24, 1, _ALL, 0.1, NAME),
    ],
    ids=["bf16", "fp16-batch2", "wide-loss", "all-bf16", "all-dropout-bf16"],
)
def test_the_forward_s_held_tensors(
    tmp_path, model, precision, target, batch, targets, lora_dropout, moment
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=target, batch=batch, precision=precision,
        lora_rank=4, lora_targets=targets, lora_dropout=lora_dropout, checkpointing="none",
        optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == moment
    assert est.per_gpu_bytes == traced.peak_bytes
