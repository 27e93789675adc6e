"""LoRA on T5 with its MLP frozen, small vocabulary (V 128 beside h 128, f 512): the last decoder
block's MLP going back (three t·b·f gradients at once, gated; two under ReLU) holds the step's
peak, the loss's log-probabilities and the final norm freed — the estimate had no such moment
(sweep 11's row, fp32 q, v SGD: −110,496 B, 0.986); with up adapted it was refused (−110,496 B),
and with the model's dropout the masks were not counted at all (−212,896 B, 0.973)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_last_mlp import NAME, NORM
from profiling.trace.step import trace_step

_T5 = {
    "vocab_size": 128, "d_model": 128, "d_ff": 512, "num_layers": 2, "num_decoder_layers": 3,
    "num_heads": 4, "d_kv": 16, "model_type": "t5", "feed_forward_proj": "gated-gelu",
    "tie_word_embeddings": False,
}  # fmt: skip
_RELU = {**_T5, "feed_forward_proj": "relu", "tie_word_embeddings": True}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "precision", "targets", "dropout"),
    [
        (_T5, "fp32", ["q", "v"], 0.0),
        (_T5, "bf16", ["q", "v"], 0.0),
        (_RELU, "fp32", ["q", "v"], 0.0),
        (_T5, "fp32", ["q", "v", "up"], 0.0),
        (_T5, "fp32", ["q", "v"], 0.1),
    ],
    ids=["gated-fp32", "gated-bf16", "relu-fp32", "up-fp32", "dropout-fp32"],
)
def test_the_last_decoder_block_s_mlp_going_back(
    tmp_path, model, precision, targets, dropout
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=1, precision=precision, lora_rank=4,
        lora_targets=targets, lora_dropout=0.0, checkpointing="none", optimizer="sgd",
        dropout=dropout,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "mixed"])
def test_the_final_norm_going_back_in_16_bits(tmp_path, precision) -> None:
    """T5 v1.0 (ReLU, tied) in 16 bits: the final norm's backward (the residual's 16-bit
    gradient beside the variance's four fp32 ones) leads — it read −12,288 B (bf16)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_RELU))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=1, precision=precision, lora_rank=4,
        lora_targets=["q", "v"], lora_dropout=0.0, checkpointing="none", optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NORM
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "mixed"])
def test_a_full_finetune_s_last_mlp_going_back(tmp_path, precision) -> None:
    """A full finetune at 64 × 2 tokens: the same moment, the final norm's normalized values and
    output and the gated product freed, the head's, the norm's and wo's weight gradients made —
    fp32 read −524,288 B (0.982, found with --gpus 1)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_T5))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=64, batch=2, precision=precision, checkpointing="none",
        optimizer="adamw",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes
