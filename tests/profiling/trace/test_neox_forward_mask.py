"""transformers' GPT-NeoX with eager attention and no checkpointing: ``GPTNeoXModel.forward``
holds its 4-D causal mask (``create_causal_mask``, b·s² in the residual's dtype) as a local
while the blocks run, so the last block's MLP going forward — the step's peak on a small
vocabulary under autocast — has it alive (``estimate.eager_mask.held_in_forward``, #31).

Before (estimate − trace, V 128, h 128, f 512, amp-bf16, LoRA q,v eager): 64 × 2 r 8 −30,440 B
(0.992), 128 × 2 r 4 −131,064 (0.977). Now above by the loss's 8 B scalars at most.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec

# (kind, seq, rank, precision)
CASES = {
    "parallel 64x2 r8 amp-bf16": ("gpt_neox", 64, 8, "amp-bf16"),
    "parallel 128x2 r4 amp-bf16": ("gpt_neox", 128, 4, "amp-bf16"),
    "sequential 128x2 r8 amp-fp16": ("gpt_neox sequential", 128, 8, "amp-fp16"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_forward_holds_the_eager_mask(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="the models are traced as transformers' modules")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    kind, seq, rank, precision = CASES[case]
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=seq, batch=2, precision=precision,
        target="cuda", lora_rank=rank, lora_targets="q,v", attention="eager",
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert 0 <= gap <= 8, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
