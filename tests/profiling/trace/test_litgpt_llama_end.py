"""LitGPT's own modules on Llama (``--loss litgpt``: its RMSNorm and fused q/k/v on transformers'
Llama) with a vocabulary small next to the blocks: the last block's MLP going forward under LoRA,
and a recomputed block's MLP going back under full training with full checkpointing, estimated
as traced (#31); a fully checkpointed LoRA block within ``recomputed_eager``'s bound.

Before (V 128, h 128, f 512, 64 × 2 tokens; estimate − trace): LoRA v,down amp-bf16 −248,320 B
(0.955) and a recomputed block under mixed −454,672 B (0.952): ``llama_end`` and
``recomputed_llama`` read only transformers' own modules (their dims carry LitGPT's norm and
q/k/v), so the earlier bounds stood. Read for LitGPT's modules, two tensors were still missing:
LitGPT's loop holds the previous micro-batch's logits through this forward (``released`` took
that line off), and transformers' RoPE tables are held beside LitGPT's fp32 copies (by
``LlamaModel.forward`` going forward, by the checkpointed layers' arguments going back). LoRA
fully checkpointed fell back to the earlier bound (the end of forward and one block): 0.789.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.test_litgpt_lora_amp import LLAMA, SCALARS

SMALL = {"vocab_size": 128, "hidden_size": 128, "intermediate_size": 512}

# (precision, LoRA targets or None for full training, tied head, extra settings, most over)
CASES = {
    "amp v,down": ("amp-bf16", "v,down", True, {}, SCALARS),
    "amp all-linear": ("amp-bf16", "all-linear", True, {}, SCALARS),
    "amp v,down 48 x 1": ("amp-bf16", "v,down", True, {"seq": 48, "batch": 1}, SCALARS),
    # the tables' over-count: transformers' position ids, kept by the checkpoints (s·8), and
    # the recomputed block's SDPA seed and offset
    "mixed full ckpt": ("mixed", None, True, {"checkpointing": "full"}, 528),
    "mixed full ckpt untied": ("mixed", None, False, {"checkpointing": "full"}, 528),
    # LoRA fully checkpointed: recomputed_eager's upper bound (0.789 of the trace before; +108,024
    # before LitGPT's fp32 RoPE copies and its loop's logits were counted in it: +189,944)
    "amp v,down full ckpt": ("amp-bf16", "v,down", True, {"checkpointing": "full"}, 190_000),
}


@pytest.mark.parametrize("case", list(CASES))
def test_litgpt_s_llama_last_mlp_is_estimated_as_traced(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="LitGPT's modules are built on transformers'")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    precision, targets, tied, extra, over = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **SMALL, "tie_word_embeddings": tied}), encoding="utf-8")
    lora = {"lora_rank": 8, "lora_targets": targets} if targets else {}
    settings = {"seq": 64, "batch": 2, **extra}
    cfg = TrainingConfig(
        model=f"hf:{path}", precision=precision, target="cuda", loss="litgpt", **settings,
        **lora,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= over, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
