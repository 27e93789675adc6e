"""peft's DoRA on the MLP's output projection of GPT-NeoX's kind (GPT-NeoX, Phi, Falcon) on an
unquantized base (and a 4-bit one without autocast; not BLOOM), vocabulary small next to the blocks
(V 128, h 128, f 512) at 256 × 2 tokens: the last block's DoRA sum at down holds the step's
peak — GELU's output, peft's fp32 cast of it, the identity's graph and B·A, the base output
waiting beside ``base_result − bias``, and the three products (profiling.estimate.
dora_neox_down, the same ops as on a Llama's down). The estimate counted LoRA's sum there, or
the largest weight norm's rebuild: `before` of the trace; now it equals the trace but for its
scalars (8 B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import neox_moments
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# (kind, LoRA targets, precision, QLoRA, lora_dropout, estimate − trace before)
CASES = [
    ("gpt_neox", "q,k,v,down", "amp-bf16", False, 0.0, -765_976),
    ("gpt_neox", "all-linear", "amp-bf16", False, 0.0, -759_832),
    ("gpt_neox", "q,k,v,down", "mixed", False, 0.0, -2_072),
    ("gpt_neox", "q,k,v,down", "amp-bf16", False, 0.1, -1_581_048),
    ("gpt_neox sequential", "q,k,v,down", "amp-bf16", False, 0.0, -626_712),
    ("phi", "q,k,v,down", "mixed", False, 0.1, -788_536),
    ("falcon-7b", "all-linear", "amp-bf16", False, 0.0, -628_856),
    ("falcon-40b", "q,k,v,down", "mixed", True, 0.0, -2_168),
    ("falcon-40b", "q,k,v,down", "mixed", False, 0.1, -919_672),
]


@pytest.mark.parametrize(("kind", "targets", "precision", "qlora", "dropout", "before"), CASES)
def test_dora_on_down_sums_as_counted(
    tmp_path: Path, kind: str, targets: str, precision: str, qlora: bool, dropout: float,
    before: int,
) -> None:  # fmt: skip
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=256, batch=2, precision=precision,
        qlora=qlora, dora=True, lora_rank=8, lora_targets=targets, lora_dropout=dropout,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == neox_moments.FORWARD
    # the trace's peak, to its scalars (the loss's, counted: 8 B over here)
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 64, before
