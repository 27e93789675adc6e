"""transformers' GPT-NeoX fully checkpointed with ``--dropout`` under autocast, down frozen: the
MLP's output dropout saves its mask last, so the recomputation runs the whole MLP again and its
end (down's output beside GELU's, the MLP's fp32 input, the gradient reaching the block and its
16-bit cast) is the step's peak; with eager attention the layer also holds its dropped fp32
probabilities (``attn_output, _ = self.attention(...)``), which only their 16-bit copy is saved
of (``estimate.recomputed_neox_amp``, #31).

Before (estimate − trace, V 128, h 128, f 512, 128 × 2 tokens, r 4, amp-bf16, SGD): sequential
LoRA v eager --grads-kept −187,392 B (0.965), q,v −181,248 (0.967), v,down −488,192 (0.923);
parallel v −252,928 (0.953). Now above by at most the kept tensors' bound (the block's input
counted beside its checkpoint, the MLP's output mask not made yet: 35,840 B here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import SMALL, neox_spec

# (kind, targets, extra settings, most over the trace in bytes)
CASES = {
    "sequential v eager grads kept": ("gpt_neox sequential", "v", {"grads_kept": True}, 36_864),
    "sequential q,v eager": ("gpt_neox sequential", "q,v", {}, 36_864),
    "sequential v,down eager": ("gpt_neox sequential", "v,down", {}, 36_864),
    "parallel v eager": ("gpt_neox", "v", {}, 36_864),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_recomputation_runs_to_the_mlp_s_dropout(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="the models are traced as transformers' modules")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    kind, targets, extra, over = CASES[case]
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=128, batch=2, precision="amp-bf16",
        target="cuda", lora_rank=4, lora_targets=targets, checkpointing="full", dropout=0.1,
        attention="eager", optimizer="sgd", **extra,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert 0 <= gap <= over, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
