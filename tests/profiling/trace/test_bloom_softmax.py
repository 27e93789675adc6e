"""LoRA on BLOOM outside autocast with a vocabulary small next to its blocks (128 beside h 128,
f 512; or fewer tokens beside the base's): going forward, the last block's eager attention
holds the step's peak — at its softmax's fp32 copy of the 16-bit masked scores, or in fp32 (no
copy) at the output projection's sum — above its MLP going back
(profiling.estimate.bloom_softmax). The estimate read `before` of the trace; now it equals it
but for the loss's scalar (8 B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import bloom_softmax
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import BASE, SMALL, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

SHAPES = {"small": SMALL, "base": BASE}
# (precision, LoRA targets, shape, seq × batch, estimate ÷ trace before)
CASES = [
    ("mixed", "q,v", "small", (256, 2), 0.9910),  # part of the fused query_key_value
    ("mixed", "k", "small", (256, 2), 0.9906),
    ("mixed", "q,k,v", "small", (512, 1), 0.99),  # b = 1: q, k, v views of the fused output
    ("bf16", "q,v", "base", (256, 2), 0.99),
    ("mixed", "o,v", "small", (512, 1), 0.99),  # an adapted o: made after the softmax
    ("fp32", "q,v", "small", (512, 1), 0.9691),  # fp32: at the output projection's sum
    ("fp32", "o,v", "base", (256, 2), 0.97),  # at o's adapter's sum
]


@pytest.mark.parametrize(("precision", "targets", "shape", "tokens", "before"), CASES)
def test_blooms_attention_going_forward_equals_the_trace(
    tmp_path: Path, precision: str, targets: str, shape: str, tokens: tuple[int, int],
    before: float,
) -> None:  # fmt: skip
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, "bloom", SHAPES[shape]), seq=tokens[0], batch=tokens[1],
        precision=precision, lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.category_bytes("activations") == traced.phases["after_forward"]["activations"]
    assert est.peak_moment == bloom_softmax.FORWARD, (before, est.per_gpu_bytes / traced.peak_bytes)
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 8, before
