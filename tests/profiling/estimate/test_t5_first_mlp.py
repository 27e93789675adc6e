"""A full finetune of T5 without autocast (gated GELU, SGD with momentum): an encoder block's MLP
going back — the first (every other weight gradient made) or, with long inputs, the last —
gelu_new's six s·b·f gradients in flight, holds the step's peak; the estimate had no such moment
and read the optimizer step (fp32, 32 input and 24 target tokens: −269,592 B, 0.983; 64 and 8:
−295,440). The shared table's two gradients meeting in autograd's input buffer at backward's
end were not counted either (t5-wide fp32: −524,296, 0.991).

Long inputs (D69, #31): one op before gelu_new, the gated product's backward (three s·b·f
gradients beside all but the product of the MLP's kept tensors) leads at the last encoder block
(128 tokens: −196,608 B; 256: −655,360); with more than two encoder blocks the first block also
has one accumulated s·b·h residual gradient per block above the second (4 blocks, 48 tokens:
−49,152)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.t5_first_mlp import NAME
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_forward_amp import _WIDE
from tests.profiling.estimate.test_t5_last_mlp import _T5  # the same toy T5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "seq", "target", "batch"),
    [("fp32", 32, 24, 1), ("fp32", 64, 8, 1), ("bf16", 32, 24, 1)],
    ids=["fp32-first", "fp32-last", "bf16"],
)
def test_the_first_encoder_block_s_mlp_going_back(tmp_path, precision, seq, target, batch) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_T5))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=seq, target_seq=target, batch=batch, precision=precision,
        checkpointing="none", optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "seq", "batch"),
    [(_T5, 128, 1), (_T5, 256, 1), ({**_T5, "num_layers": 4}, 48, 1)],
    ids=["product-128", "product-256", "four-blocks"],
)
def test_long_inputs_and_deeper_encoders(tmp_path, model, seq, batch) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=seq, target_seq=24, batch=batch, precision="fp32",
        checkpointing="none", optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.slow
def test_the_shared_table_s_gradients_meeting(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_WIDE))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=32, target_seq=24, batch=1, precision="fp32",
        checkpointing="none", optimizer="sgd",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == "end of backward"
    assert est.per_gpu_bytes == traced.peak_bytes
