"""transformers' Llama under full checkpointing and eager attention: ``LlamaModel.forward`` builds
its 4-D causal mask once (``masking_utils.eager_mask``: b × 1 × s × s in the residual stream's
dtype) and every checkpointed decoder layer keeps it as an argument until the first layer's
backward (``estimate.eager_mask``, counted for GPT-2 since d284905). The estimate missed it on
Llama: llama-base fp32 full training −32,768 B (0.988), LoRA amp-bf16 −32,768 B, the untied
4-layer toy's QLoRA bf16 at 32 × 1 −2,048 B (b·s²·2). Now equal to the trace; without
checkpointing (the mask dies as forward returns) and under SDPA (no mask: causal) unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("transformers", reason="the hf extra is not installed")

LLAMA = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama", "tie_word_embeddings": True,
}  # fmt: skip
UNTIED_L4 = {**LLAMA, "num_hidden_layers": 4, "tie_word_embeddings": False}
QLORA = {"lora_rank": 4, "lora_targets": "q,v", "qlora": True}
LORA = {"lora_rank": 8, "lora_targets": "q,v"}
# name: (model, fields; the old estimate − trace in the comment)
CASES = {
    "fp32 full": (LLAMA, {}),  # −32,768 B (0.988)
    "amp-bf16 full": (LLAMA, {"precision": "amp-bf16"}),  # −32,768 B
    "amp-bf16 lora": (LLAMA, {"precision": "amp-bf16", **LORA}),  # −32,768 B
    "bf16 lora": (LLAMA, {"precision": "bf16", **LORA}),  # −16,384 B
    "bf16 qlora untied l4 32 x 1": (
        UNTIED_L4, {"precision": "bf16", "seq": 32, "batch": 1, "dropout": 0.1,
                    "optimizer": "rmsprop", **QLORA},
    ),  # −2,048 B (the audit's sweep row)
    "amp-bf16 lora litgpt": (LLAMA, {"precision": "amp-bf16", "loss": "litgpt", **LORA}),
    # neighbours, equal before and after: no checkpoints keep the mask, or SDPA makes none
    "fp32 full no ckpt": (LLAMA, {"checkpointing": "none"}),
    "fp32 full sdpa": (LLAMA, {"attention": "sdpa"}),
}  # fmt: skip
SCALARS = 24  # the loss's scalars, uncounted


@pytest.mark.parametrize("case", list(CASES))
def test_llama_s_eager_mask_kept_by_checkpoints_is_estimated(tmp_path: Path, case: str) -> None:
    model, fields = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    values: dict[str, object] = {
        "model": f"hf:{path}", "seq": 64, "batch": 2, "checkpointing": "full",
        "attention": "eager", "target": "cuda", **fields,
    }  # fmt: skip
    cfg = TrainingConfig.parse(style="field", **values)
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= SCALARS, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
