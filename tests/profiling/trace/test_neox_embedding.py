"""The end of backward of a GPT-NeoX-kind decoder trained whole, on few tokens with SGD: the
embedding going back (every other gradient made, the gradient reaching it alive) on an untied
head (``estimate.neox_embedding``), and the loop's hold on the loss (its scalars, LitGPT's
logits) beside a tied head's summed gradients (``step_moments``' end of backward).

Before (estimate − trace, V 512, h 64, f 160, 2 blocks, SGD): GPT-NeoX fp32 seq 32, eager, full
checkpointing −8,200 B (s·b·h·4 + 8: the optimizer step led); Phi, GPT-NeoX sequential the same
kind of gap; tied Falcon and BLOOM −8 B (the loss's scalars), a tied Falcon-7B under LitGPT's
loss −32,776 B (its logits, s·b·V·4, + 8). Now equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import neox_spec

pytest.importorskip("transformers", reason="the models are traced as transformers' modules")

# (kind, seq, precision, checkpointing, extra settings)
CASES = {
    "gpt_neox fp32 eager full": ("gpt_neox", 32, "fp32", "full", {"attention": "eager"}),
    "gpt_neox amp-bf16 full": ("gpt_neox", 16, "amp-bf16", "full", {}),
    "phi fp32 eager none": ("phi", 32, "fp32", "none", {"attention": "eager"}),
    "gpt_neox sequential bf16 full": ("gpt_neox sequential", 16, "bf16", "full", {}),
    "gpt_neox litgpt fp32 full": ("gpt_neox", 16, "fp32", "full", {"loss": "litgpt"}),
    "falcon-40b tied fp32 full": ("falcon-40b", 32, "fp32", "full", {"attention": "eager"}),
    "bloom tied bf16 full": ("bloom", 16, "bf16", "full", {}),
    "falcon-7b tied litgpt amp": ("falcon-7b", 16, "amp-bf16", "none", {"loss": "litgpt"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_end_of_backward_on_few_tokens(tmp_path: Path, case: str) -> None:
    kind, seq, precision, ckpt, extra = CASES[case]
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind), seq=seq, batch=1, precision=precision,
        checkpointing=ckpt, optimizer="sgd", target="cuda", **extra,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (case, est.peak_moment, traced.peak_phase)
