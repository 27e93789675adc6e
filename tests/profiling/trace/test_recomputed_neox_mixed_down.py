"""transformers' GPT-NeoX fully checkpointed under ``--precision mixed`` (fp32 adapters over a
bf16 base, no autocast) with down adapted: the recomputation's end at down's adapter (peft's
fp32 cast of GELU's output saved by A, GELU's and the base's 16-bit outputs, the MLP's norm
output and the attention's output as locals, the cast-back's fp32 gradient and its 16-bit cast
from backward; with ``--dropout`` B's output and scaled copy, the mask saved last not made yet)
is the step's peak (``estimate.recomputed_neox_mixed``); with q/k/v partly adapted too, the
fused adapter's sum holds down's waiting gradients beside it (``recomputed_qkv.down_waiting``).

Before (estimate − trace, V 128, h 128, f 512, 128 × 2 tokens, r 4, SGD): parallel v,down
−36,864 B (0.989), with --dropout −69,632 (0.979); q,v,down parallel −83,944 (0.976),
sequential −18,408 (0.995). Now equal to the byte (#31).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec

# (kind, targets, --dropout)
CASES = {
    "parallel v,down": ("gpt_neox", "v,down", 0.0),
    "parallel v,down dropout": ("gpt_neox", "v,down", 0.1),
    "parallel q,v,down": ("gpt_neox", "q,v,down", 0.0),
    "sequential q,v,down": ("gpt_neox sequential", "q,v,down", 0.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_recomputation_s_end_at_down_s_adapter(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="the models are traced as transformers' modules")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    kind, targets, dropout = CASES[case]
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=128, batch=2, precision="mixed",
        target="cuda", lora_rank=4, lora_targets=targets, checkpointing="full",
        dropout=dropout, optimizer="sgd",
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert 0 <= gap <= 64, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
