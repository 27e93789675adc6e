"""Llama's kind trained whole under autocast, small vocabulary: the first block's MLP gate going
back (its 16-bit weight gradient cast to fp32 beside it, every other gradient but the first
block's attention's made) holds the step's peak — the estimate had no such moment (sweep 11's
untied wide toy, Liger's loss, amp-fp16 SGD: −170,784 B, 0.993; the tied small toy, amp-bf16
8-bit Adam: −53,152 B, 0.990). Its neighbours in other precisions keep their moments."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiling.config import TrainingConfig
from profiling.estimate.llama_first_gate import NAME
from profiling.estimate.memory import Estimate, estimate
from profiling.trace.step import trace_step

_SMALL = {
    "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama", "tie_word_embeddings": True,
}  # fmt: skip
_WIDE = {**_SMALL, "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024,
         "tie_word_embeddings": False}  # fmt: skip


def _run(tmp_path, model: dict[str, object], **kw: object) -> tuple[int, Estimate]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(model=f"hf:{path}", seq=16, batch=2, checkpointing="none", **kw)
    return trace_step(cfg).peak_bytes, estimate(cfg)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "kw"),
    [
        (_WIDE, {"precision": "amp-fp16", "optimizer": "sgd", "loss": "liger"}),
        (_SMALL, {"precision": "amp-bf16", "optimizer": "adam8bit"}),
    ],
    ids=["untied-wide-amp-fp16-liger-sgd", "tied-small-amp-bf16-adam8bit"],
)
def test_the_first_block_s_gate_going_back(tmp_path, model, kw) -> None:
    traced, est = _run(tmp_path, model, **kw)
    peak = max(est.moments, key=lambda m: m.bytes)
    assert peak.name == NAME
    assert peak.bytes == traced


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "mixed"])
def test_neighbours_keep_their_peak(tmp_path, precision) -> None:
    """Without autocast the gate's weight gradient is ``.grad`` itself: the first block's input
    norm (bf16) or the optimizer step (mixed) stays the peak, equal to the trace."""
    traced, est = _run(tmp_path, _SMALL, precision=precision, optimizer="adam8bit")
    assert est.peak_moment != NAME
    assert est.per_gpu_bytes == traced
