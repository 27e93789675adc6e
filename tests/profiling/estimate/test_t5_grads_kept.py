"""A T5 full finetune whose loop keeps ``.grad`` (``--grads-kept``): going back through the last
decoder block's wo, its weight gradient is made apart (h·f) and added into the kept ``.grad`` in
place while wo's input and its input gradient are alive, and a tied head's gradient waits in
autograd's input buffer for the embedding's. The estimate read mul's three gradients after wo
and nothing made (t5-wide fp32: −950,272 B, 0.985; the toy −212,992; T5 v1.0's tied ReLU toy
still −65,536 with wo's gradient alone; with --dropout, −12,288 more: wo's output gradient
beside the residual's)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_last_mlp import WO
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_forward_amp import _WIDE
from tests.profiling.estimate.test_t5_last_mlp import _RELU, _T5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "precision", "batch", "dropout"),
    [(_WIDE, "fp32", 1, 0.0), (_T5, "bf16", 2, 0.1), (_RELU, "fp32", 1, 0.0)],
    ids=["wide-fp32", "bf16-dropout", "relu-tied"],
)
def test_wo_s_fresh_gradient_beside_the_kept_one(
    tmp_path, model, precision, batch, dropout
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=batch, precision=precision,
        checkpointing="none", optimizer="sgd", grads_kept=True, dropout=dropout,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == WO
    assert est.per_gpu_bytes == traced.peak_bytes
