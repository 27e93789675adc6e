"""LoRA's targets as each family has them (audit3 D39): a gate the model's MLP lacks is refused
in one sentence before anything runs (GPT-2 was estimated "adapters on gate"; GPT-NeoX's kind
dropped it silently; BERT's refusal stands, T5 v1.0's is tests/profiling/trace/test_lora_t5.py's),
and all-linear (or mlp) names the family's own linears only (BERT's and T5 v1.0's all-linear were
refused for the gate it named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError

TOYS = {
    "gpt2": {"model_type": "gpt2", "vocab_size": 512, "n_embd": 64, "n_inner": 160, "n_layer": 2,
             "n_head": 4, "n_positions": 512},
    "bert": {"model_type": "bert", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
             "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 130,
             "architectures": ["BertForSequenceClassification"]},
    "gpt_neox": {"model_type": "gpt_neox", "vocab_size": 512, "hidden_size": 64,
                 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4},
    "t5-relu": {"model_type": "t5", "vocab_size": 512, "d_model": 64, "d_ff": 160,
                "num_layers": 2, "num_heads": 4, "d_kv": 16, "feed_forward_proj": "relu"},
    "t5-gated": {"model_type": "t5", "vocab_size": 512, "d_model": 64, "d_ff": 160,
                 "num_layers": 2, "num_heads": 4, "d_kv": 16, "feed_forward_proj": "gated-gelu"},
    "llama": {"model_type": "llama", "vocab_size": 512, "hidden_size": 64,
              "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4},
}  # fmt: skip
NO_GATE = ["gpt2", "bert", "gpt_neox", "t5-relu"]
OWN = ["q", "k", "v", "o", "up", "down"]


def _model(tmp_path: Path, toy: str) -> str:
    path = tmp_path / f"{toy}.json"
    path.write_text(json.dumps(TOYS[toy]), encoding="utf-8")
    return f"hf:{path}"


@pytest.mark.parametrize("model", ["gpt2-small", "gpt2", "gpt_neox", "bert"])
@pytest.mark.parametrize("targets", ["gate", "q,gate", "gate,up"])
def test_a_gate_the_model_lacks_is_refused(tmp_path: Path, model: str, targets: str) -> None:
    spec = model if model == "gpt2-small" else _model(tmp_path, model)
    with pytest.raises(ConfigError, match="has no gate projection") as err:
        TrainingConfig.parse(style="field", model=spec, lora_rank=8, lora_targets=targets)
    assert str(err.value).count(". ") == 0  # one sentence


@pytest.mark.parametrize("model", ["gpt2-small", *NO_GATE])
def test_all_linear_is_the_familys_own_linears(tmp_path: Path, model: str) -> None:
    spec = model if model == "gpt2-small" else _model(tmp_path, model)
    cfg = TrainingConfig.parse(style="field", model=spec, lora_rank=8, lora_targets="all-linear")
    assert cfg.lora_targets == OWN
    mlp = TrainingConfig.parse(style="field", model=spec, lora_rank=8, lora_targets="q,v,mlp")
    assert mlp.lora_targets == ["q", "v", "up", "down"]


@pytest.mark.parametrize("model", ["llama", "t5-gated"])
def test_a_gated_mlp_keeps_its_gate(tmp_path: Path, model: str) -> None:
    spec = _model(tmp_path, model)
    cfg = TrainingConfig.parse(style="field", model=spec, lora_rank=8, lora_targets="all-linear")
    assert cfg.lora_targets == ["q", "k", "v", "o", "gate", "up", "down"]
    one = TrainingConfig.parse(style="field", model=spec, lora_rank=8, lora_targets="q,gate")
    assert one.lora_targets == ["q", "gate"]


def test_the_api_refuses_before_peft(tmp_path: Path) -> None:
    """trace_step reads the same configuration: peft's error never reaches the caller."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from profiling.errors import ProfilingError
    from profiling.trace.step import trace_step

    with pytest.raises(ProfilingError, match="has no gate projection"):
        trace_step(TrainingConfig(model=_model(tmp_path, "gpt_neox"), lora_rank=8,
                                  lora_targets=["q", "gate"]))  # fmt: skip
