"""A fully checkpointed GPT-NeoX-kind block under ``mixed`` (a bf16 base, fp32 adapters) with
up adapted: the recomputation's own moment at up's adapter — B's fp32 output and its scaled
copy beside the base's output, before the MLP's gradients exist — bounded by
``estimate.recomputed_neox._at_up``. Before (V 128, h 128, f 512, 64 × 2 tokens, r 8, LoRA
all-linear): GPT-NeoX 0.993 of the trace (−18,432 B), Falcon-40B eager 0.991 (−22,528 B); now
a bound at most 1.045 above (every other kept tensor counted as recomputed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec


@pytest.mark.parametrize(("kind", "attention"), [("gpt_neox", "sdpa"), ("falcon-40b", "eager")])
def test_the_recomputation_at_up_s_adapter_is_bounded(
    tmp_path: Path, kind: str, attention: str
) -> None:
    pytest.importorskip("transformers", reason="the models are traced as transformers' modules")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=64, batch=2, precision="mixed",
        target="cuda", lora_rank=8, lora_targets="all-linear", checkpointing="full",
        attention=attention,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.045 * traced.peak_bytes, est.moments
