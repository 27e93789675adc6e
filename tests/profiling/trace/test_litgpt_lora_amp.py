"""LitGPT's finetune scripts (``--loss litgpt``: its own RMSNorm and fused q/k/v) under LoRA and
autocast, estimated as traced (#31).

Before (V 512, h 64, f 160, 64 × 2 tokens, r 8; estimate − trace): amp-bf16 q,v −48,136 B
(0.981), all-linear −130,056 B (0.955): the frozen layers' autocast copies were taken off as
transformers' five (q, k, v, gate, up) where LitGPT's fused q/k/v makes one, and the fused
adapter's one input and zero_pad's update counted in the adapters' fp32 where autocast runs them
in bf16. fp32 LoRA +1,016 B, amp-bf16 full training +1,288 B: an fp32 copy of each norm's weight
that ``weight.float()`` of an fp32 weight never makes. Now within the step's scalars.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

LLAMA = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama",
}  # fmt: skip
SCALARS = 8  # the loss's scalars, uncounted as in full training

# (precision, LoRA targets or None for full training)
CASES = {
    "amp q,v": ("amp-bf16", "q,v"),
    "amp all-linear": ("amp-bf16", "all-linear"),
    "amp v": ("amp-bf16", "v"),
    "amp q,k,v (no zero_pad)": ("amp-bf16", "q,k,v"),
    "amp full": ("amp-bf16", None),
    "fp32 q,v": ("fp32", "q,v"),
    # neighbours, equal before and after
    "bf16 q,v": ("bf16", "q,v"),
    "mixed all-linear": ("mixed", "all-linear"),
    "bf16 full": ("bf16", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_litgpt_s_lora_under_autocast_is_estimated_as_traced(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="LitGPT's modules are built on transformers'")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    precision, targets = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA), encoding="utf-8")
    lora = {"lora_rank": 8, "lora_targets": targets} if targets else {}
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=64, batch=2, precision=precision, target="cuda", loss="litgpt",
        **lora,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= SCALARS, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
