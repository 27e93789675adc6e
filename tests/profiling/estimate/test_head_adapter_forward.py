"""LoRA on the LM head under PyTorch's loss: the head's forward (the frozen head's logits, B's
output and its scaled copy at once, beside the final norm's output) holds the step's peak on a
GPT-NeoX toy — the estimate had no such moment (fp32 q, v, lm_head, lora_dropout 0.1, eager
attention: −16,376 B, 0.992; a Llama toy alike)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from profiling.config import TrainingConfig
from profiling.estimate.head_adapter_forward import NAME
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

_NEOX = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 3,
    "num_attention_heads": 4, "max_position_embeddings": 512, "model_type": "gpt_neox",
    "rotary_pct": 0.25,
}  # fmt: skip
_LLAMA = {**_NEOX, "model_type": "llama", "num_key_value_heads": 2, "tie_word_embeddings": True}
del _LLAMA["rotary_pct"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "attention"),
    [(_NEOX, "eager"), (_NEOX, "sdpa"), (_LLAMA, "sdpa")],
    ids=["neox-eager", "neox-sdpa", "llama-sdpa"],
)
def test_the_head_s_adapter_going_forward(tmp_path, model, attention) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model))
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=64, batch=1, precision="fp32", lora_rank=4,
        lora_targets=["q", "v", "lm_head"], lora_dropout=0.1, checkpointing="none",
        attention=attention, optimizer="adamw",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes
