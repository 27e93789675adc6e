"""transformers' Llama trained whole on the wide toys (h 256, f 1024, V 256), Liger's fused
linear cross-entropy or PyTorch's loss: three backward instants the estimate missed (#31).

- the first block's SwiGLU product going back, right after down's (``llama_first_gate``): its
  MLP's saved tensors but the product beside down's input gradient and mul's two, every gradient
  but its attention's, norms', gate's, up's and the embedding's made — fp32 SGD 64 × 2 untied
  −262,144 B (0.990), bf16 −84,000 B;
- under autocast, the last block's up weight gradient cast to fp32 beside its 16-bit one
  (``last_mlp.up_weight_cast``): amp-bf16 8-bit Adam −65,544 B (0.997);
- an untied embedding going back (``neox_embedding``, now Llama's kind too): fp32 SGD 16 × 2
  −32,776 B.
Now equal to the trace (Liger's loss: within its 8 B of scalars)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("transformers", reason="the hf extra is not installed")

WIDE = {
    "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama", "tie_word_embeddings": True,
}  # fmt: skip
UNTIED = {**WIDE, "tie_word_embeddings": False}
# name: (model, fields; the old estimate − trace in the comment)
CASES = {
    "untied fp32 liger sgd": (UNTIED, {"precision": "fp32", "optimizer": "sgd"}),  # −262,144
    "fp32 sgd": (
        WIDE, {"precision": "fp32", "optimizer": "sgd", "loss": "cross-entropy"}
    ),  # −262,144
    "untied bf16 liger adam8bit": (UNTIED, {"precision": "bf16"}),  # −84,000
    "amp-bf16 liger adam8bit": (WIDE, {"precision": "amp-bf16"}),  # −65,544
    "untied amp-fp16 sgd": (
        UNTIED, {"precision": "amp-fp16", "optimizer": "sgd", "loss": "cross-entropy"}
    ),  # −65,536
    "untied fp32 liger sgd 16 x 2": (
        UNTIED, {"precision": "fp32", "optimizer": "sgd", "seq": 16}
    ),  # −32,776
    # a neighbour, equal before and after: mixed's optimizer step leads
    "mixed liger sgd": (WIDE, {"precision": "mixed", "optimizer": "sgd"}),
}  # fmt: skip
SCALARS = 8  # Liger's loss's scalars, uncounted


@pytest.mark.parametrize("case", list(CASES))
def test_llama_s_mlp_and_embedding_going_back_are_estimated(tmp_path: Path, case: str) -> None:
    model, fields = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    values: dict[str, object] = {
        "model": f"hf:{path}", "seq": 64, "batch": 2, "loss": "liger", "optimizer": "adam8bit",
        "target": "cuda", **fields,
    }  # fmt: skip
    cfg = TrainingConfig.parse(style="field", **values)
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= 0, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
