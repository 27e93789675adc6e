"""LoRA on T5 without autocast, small vocabulary (V 128 beside h 128, f 512): the last decoder
block's MLP going forward — at wo's adapter (the base's, B's and the scaled outputs beside what
wo reads) or at the MLP's own dropout (the product and its dropped copy) — holds the step's
peak; the estimate had no such moment: audit6's fp32 all-linear lora_dropout 8-bit Adam at 64
tokens −262,392 B (0.9817), mixed q, v, gate with dropout −3,772 B."""

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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "seq", "target", "rank", "targets", "lora_dropout", "dropout", "optimizer"),
    [
        ("fp32", 64, None, 8, ["all-linear"], 0.1, 0.0, "adam8bit"),
        ("mixed", 32, 24, 4, ["q", "v", "gate"], 0.0, 0.1, "sgd"),
        ("mixed", 32, 24, 4, ["q", "v", "down"], 0.1, 0.0, "sgd"),
        ("mixed", 32, 24, 4, ["all-linear"], 0.0, 0.0, "sgd"),
    ],
    ids=["audit6-fp32", "mixed-gate-dropout", "mixed-down-lora-dropout", "mixed-all"],
)
def test_the_last_decoder_block_s_mlp_going_forward(
    tmp_path, precision, seq, target, rank, targets, lora_dropout, dropout, optimizer
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_T5))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=seq, target_seq=target, batch=1, precision=precision,
        lora_rank=rank, lora_targets=targets, lora_dropout=lora_dropout, dropout=dropout,
        checkpointing="none", optimizer=optimizer,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes
