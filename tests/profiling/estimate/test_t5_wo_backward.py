"""LoRA on T5 with wo adapted (``down``, all-linear), no autocast or dropout: the last decoder
block's MLP going back, where wo's lora_A sums the frozen wo's input gradient with its own
beside the product it kept, and A's and B's weight gradients made. The estimate had no
backward moment with wo adapted (fp32 all-linear 32 → 24 tokens: −61,896 B, 0.993)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_last_mlp import NAME
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_last_mlp import _T5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rank", "targets", "batch", "optimizer"),
    [(4, ["all-linear"], 1, "sgd"), (8, ["q", "v", "down"], 1, "sgd"),
     (4, ["all-linear"], 2, "adamw")],
    ids=["all-linear", "q-v-down", "batch2-adamw"],
)  # fmt: skip
def test_wo_s_adapter_going_back(tmp_path, rank, targets, batch, optimizer) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_T5))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=batch, precision="fp32",
        checkpointing="none", optimizer=optimizer, lora_rank=rank, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes
