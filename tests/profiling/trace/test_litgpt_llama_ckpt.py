"""LitGPT's own modules on Llama (``--loss litgpt``) under full checkpointing: what LitGPT holds
beside transformers' tensors while the blocks go back, estimated at or above the trace (#31).

``litgpt_attention._fp32`` copies transformers' cos/sin to fp32 (``copy=True``) keyed weakly on
them: without checkpointing transformers' die as the model's forward returns and the copies
alone stay; under full checkpointing the checkpoints keep transformers' tables (a block
argument) and so the copies too. The end of forward counted only one of the two (4 B a value
in all, ``litgpt_qkv.tables``), and ``recomputed_eager``'s bound for a recomputed LoRA block
counted transformers' tables alone and not the logits LitGPT's loop holds through backward.

Before (estimate − trace, 64 × 2 tokens, r 8): V 128 / h 128 bf16 q,v −75,272 B (0.969, tied or
untied), fp32 q,v −2,568 B; V 512 / h 64 amp-bf16 v,down −8,200 B, bf16 full training −4,088 B,
mixed q,v −4,104 B. Now the V 512 rows equal the trace within the loss's scalars; the V 128
LoRA rows are ``recomputed_eager``'s upper bound (+6,648 B bf16, +79,352 B fp32).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.test_litgpt_llama_end import SMALL
from tests.profiling.trace.test_litgpt_lora_amp import LLAMA, SCALARS

# (model's keys over LLAMA, precision, LoRA targets or None for full training, most over)
CASES = {
    "small untied bf16 q,v": ({**SMALL, "tie_word_embeddings": False}, "bf16", "q,v", 8_000),
    "small bf16 q,v": (SMALL, "bf16", "q,v", 8_000),
    "small fp32 q,v": (SMALL, "fp32", "q,v", 80_000),
    "amp-bf16 v,down": ({}, "amp-bf16", "v,down", SCALARS),
    "bf16 full training": ({}, "bf16", None, SCALARS),
    "mixed q,v": ({}, "mixed", "q,v", SCALARS),
}


@pytest.mark.parametrize("case", list(CASES))
def test_litgpt_s_llama_under_full_checkpointing_is_not_below_the_trace(
    tmp_path: Path, case: str
) -> None:
    pytest.importorskip("transformers", reason="LitGPT's modules are built on transformers'")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    keys, precision, targets, over = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **keys}), encoding="utf-8")
    lora = {"lora_rank": 8, "lora_targets": targets} if targets else {}
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=64, batch=2, precision=precision, target="cuda", loss="litgpt",
        checkpointing="full", **lora,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= over, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
