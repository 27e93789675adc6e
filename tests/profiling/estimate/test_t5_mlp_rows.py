"""T5 full finetunes whose peak is an MLP going back at an op the estimate had no moment for
(issue #31's rows, SGD with momentum, no checkpointing):

- under autocast, an encoder block's gated MLP (``t5_first_mlp_amp``): the step read the end of
  backward — toy 32 → 24 amp-bf16 −326,688 B (0.979); at 128 input tokens the product's mul
  leads (−131,072 B with GELU's last mul only), with four encoder blocks the last block
  (−4,096 B), on the wide toy (h 256) wi_1's weight gradient cast (−196,608 B);
- in bf16 at 32 → 24 × 2 the last decoder block's GELU mul, one op after the product's
  (``t5_last_mlp.GELU``: −45,056 B, 0.995)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate import t5_first_mlp, t5_first_mlp_amp, t5_last_mlp
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.estimate.test_t5_forward_amp import _WIDE
from tests.profiling.estimate.test_t5_last_mlp import _T5  # the same toy T5


def _run(tmp_path, model: dict, **given: object) -> tuple[int, int, str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(model=f"hf:{path}", checkpointing="none", optimizer="sgd", **given)
    traced, est = trace_step(cfg), estimate(cfg)
    return est.per_gpu_bytes, traced.peak_bytes, est.peak_moment


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "precision", "seq", "batch"),
    [
        (_T5, "amp-bf16", 32, 1),
        (_T5, "amp-bf16", 128, 1),
        ({**_T5, "num_layers": 4}, "amp-bf16", 48, 1),
        (_WIDE, "amp-bf16", 32, 1),
    ],
    ids=["gelu-32", "product-128", "four-blocks", "wide-cast"],
)
def test_an_encoder_block_s_mlp_going_back_under_autocast(
    tmp_path, model, precision, seq, batch
) -> None:
    est, traced, moment = _run(
        tmp_path, model, precision=precision, seq=seq, target_seq=24, batch=batch
    )
    assert moment == t5_first_mlp_amp.NAME
    assert est == traced


@pytest.mark.slow
def test_the_last_decoder_block_s_gelu_mul_in_bf16(tmp_path) -> None:
    est, traced, moment = _run(tmp_path, _T5, precision="bf16", seq=32, target_seq=24, batch=2)
    assert moment == t5_last_mlp.GELU
    assert est == traced


@pytest.mark.slow
@pytest.mark.parametrize("seq", [32, 128], ids=["wi-32", "threshold-128"])
def test_an_encoder_block_s_relu_mlp_going_back(tmp_path, seq) -> None:
    """T5 v1.0 (ReLU, tied head), fp32: the first encoder block's MLP at wi's input gradient
    (−7,440 B before), or at 128 tokens two ops earlier, ReLU's backward (−196,608 B)."""
    relu = {**_T5, "feed_forward_proj": "relu", "tie_word_embeddings": True}
    est, traced, moment = _run(tmp_path, relu, precision="fp32", seq=seq, target_seq=24, batch=1)
    assert moment == t5_first_mlp.NAME
    assert est == traced


@pytest.mark.slow
def test_relu_s_adapted_wo_going_back(tmp_path) -> None:
    """LoRA all-linear on T5 v1.0 (ReLU, tied), fp32: wo's lora_A summing the frozen wo's input
    gradient beside ReLU's output, three t·b·f at once (−111,048 B, 0.979, before)."""
    pytest.importorskip("peft")
    relu = {**_T5, "feed_forward_proj": "relu", "tie_word_embeddings": True}
    est, traced, moment = _run(
        tmp_path, relu, precision="fp32", seq=32, target_seq=24, batch=1, lora_rank=4,
        lora_targets=["all-linear"], lora_dropout=0.0,
    )  # fmt: skip
    assert moment == t5_last_mlp.NAME
    assert est == traced


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "seq", "target", "batch"),
    [("amp-bf16", 128, 96, 8), ("amp-fp16", 32, 24, 2)],
    ids=["bf16-128-96x8", "fp16-32-24x2"],
)
def test_the_last_decoder_block_s_mlp_under_autocast(
    tmp_path, precision, seq, target, batch
) -> None:
    """Under autocast the last decoder block's product mul going back, wi_1's output gradient
    cast to 16 bits (the estimate read the loss's forward: −2,913,792 B, 0.968; −336,192)."""
    est, traced, moment = _run(
        tmp_path, _T5, precision=precision, seq=seq, target_seq=target, batch=batch
    )
    assert moment == t5_last_mlp.NAME
    assert est == traced
