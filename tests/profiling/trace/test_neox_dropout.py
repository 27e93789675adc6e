"""``--dropout`` under full training on GPT-NeoX's kind of decoder with a vocabulary small next
to its blocks (128 beside h 128, f 512): going back, the last block's MLP's dropout hands its
input's gradient (s·b·h) to the output projection, its mask freed; GPT-NeoX drops the MLP's
output alone, so that gradient is held beside the projection's input gradient (the peak
there); Falcon's one ``dropout_add`` drops the MLP's and the attention's sum, so it is held
through GELU's backward, and Falcon keeps one mask a block, not two
(profiling.estimate.neox_moments._dropout, neox.dropout_masks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import neox_moments
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")

# (kind, precision, seq × batch, LoRA targets or None, estimate − trace before)
CASES = [
    ("gpt_neox", "fp32", (256, 2), None, -196_608),  # 0.9879
    ("gpt_neox", "fp32", (128, 3), None, -147_456),  # 0.9891
    ("gpt_neox sequential", "fp32", (256, 2), None, -196_608),  # 0.9883
    ("falcon-7b", "fp32", (256, 2), None, -65_536),  # 0.9950 (its masks counted twice)
    ("falcon-40b", "fp32", (128, 3), None, -49_152),  # 0.9959
    ("phi", "fp32", (256, 2), None, 65_536),  # 1.0030: GELU's backward higher, its mask freed
    ("phi", "bf16", (256, 2), None, 65_536),  # 1.0058
    # LoRA: Falcon's gradient held through GELU's backward (its masks were counted twice)
    ("falcon-7b", "fp32", (256, 2), "q,v", -65_536),  # 0.9920
    ("falcon-40b", "bf16", (256, 2), "q,v", 65_536),  # 1.0139
    ("gpt_neox sequential", "bf16", (256, 2), "q,v", 65_536),  # 1.0106: GELU's, its mask freed
]


@pytest.mark.parametrize(("kind", "precision", "tokens", "targets", "before"), CASES)
def test_the_mlps_dropout_going_back_equals_the_trace(
    tmp_path: Path, kind: str, precision: str, tokens: tuple[int, int], targets: str | None,
    before: int,
) -> None:  # fmt: skip
    lora = {"lora_rank": 8, "lora_targets": targets} if targets else {}
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=tokens[0], batch=tokens[1],
        precision=precision, dropout=0.1, **lora,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    seen = traced.phases["after_forward"]["activations"]
    assert est.category_bytes("activations") == seen
    assert est.peak_moment == neox_moments.BACKWARD
    assert est.per_gpu_bytes == traced.peak_bytes, (before, est.per_gpu_bytes - traced.peak_bytes)
