"""LitGPT's RMSNorm under its finetune scripts (--loss litgpt on a Llama-shaped config): eager
ops that keep the fp32 normalized values and the weight's fp32 copy where transformers' Llama
keeps the normalized values cast back to 16 bits — traced as LitGPT's module computes it and
estimated to the same bytes. TinyLlama (4 fully published LitGPT rows) is in the catalogue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.implementation import transformers_installed
from profiling.trace.step import trace_step

pytestmark = pytest.mark.skipif(not transformers_installed(), reason="transformers' Llama")

H, L, S, B = 64, 3, 64, 2


def _model(tmp_path: Path) -> str:
    config = {
        "model_type": "llama", "vocab_size": 512, "hidden_size": H, "intermediate_size": 160,
        "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 512, "tie_word_embeddings": False,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


CASES = [
    ("LoRA's script (--loss litgpt)", {"lora_rank": 8, "loss": "litgpt"}),
    ("full.py's model with its own loss", {"litgpt_norm": True}),
]


@pytest.mark.parametrize(("what", "extra"), CASES)
def test_litgpt_s_norm_keeps_the_fp32_normalized_values_traced_and_estimated(
    tmp_path: Path, what: str, extra: dict
) -> None:
    model = _model(tmp_path)
    cfg = TrainingConfig(model=model, seq=S, batch=B, precision="bf16", target="cuda", **extra)
    traced, est = trace_step(cfg), estimate(cfg)
    assert "LitGPT's RMSNorm (7)" in traced.model_info["implementation"]  # 2 a block + final
    # Estimate = trace: the activations and the peak to the trace's scalar buffers (the token
    # ids and labels counted; transformers' shifted labels gone by the loss backward's peak).
    acts = traced.phases["after_forward"]["activations"]
    assert 0 <= acts - est.category_bytes("activations") <= 128
    # (the step's scalars counted since estimate.step_scalars: full.py's loss backward reads
    # 24 B above the trace, the safe side)
    assert -32 <= traced.peak_bytes - est.per_gpu_bytes <= 256
    # What changed against transformers' norm: a trained weight keeps the fp32 normalized
    # values (8 B an element with the fp32 input, where transformers keeps 4 + 2), and every norm
    # a gradient reaches keeps its weight in fp32.
    hf = estimate(cfg.model_copy(update={"loss": "cross-entropy", "litgpt_norm": False}))
    assert not any("LitGPT" in c.name for c in hf.components)
    ours = next(c for c in est.components if c.name.startswith("Activations: norms (RMSNorm"))
    theirs = next(c for c in hf.components if c.name.startswith("Activations: norms (RMSNorm"))
    assert "LitGPT's eager ops" in ours.name and "transformers' eager ops" in theirs.name
    assert ours.bytes == L * S * B * 2 * (8 * H + 4)
    assert theirs.bytes == L * S * B * 2 * ((4 + 2) * H + 4)
    if cfg.lora_rank is not None:  # a frozen weight: the fp32 input alone, both alike
        frozen = [next(c.bytes for c in x.components if c.name.endswith("normalized outputs kept"))
                  for x in (est, hf)]  # fmt: skip
        assert ours.bytes + frozen[0] == theirs.bytes + frozen[1] == L * S * B * 2 * (4 * H + 4)
    weights = next(c for c in est.components if "LitGPT's weight in fp32" in c.name)
    assert weights.bytes == L * 2 * H * 4


def test_tinyllama_is_the_catalogue_s_and_its_litgpt_configs_read_it() -> None:
    from profiling.recipes import read_recipe

    here = Path(__file__).resolve().parents[3] / "benchmarks" / "peer" / "configs" / "litgpt"
    for method in ("full", "lora", "qlora"):
        values = read_recipe([here / f"tiny-llama__{method}.yaml"]).values
        assert values["model"] == "hf:tinyllama-1.1b"
    cfg = TrainingConfig.parse(**{**read_recipe([here / "tiny-llama__full.yaml"]).values})
    est = estimate(cfg)
    assert est.params == 1_100_048_384
    # full.py's model is LitGPT's whatever its loss: 22 blocks · 2 norms, 512 × 4 tokens, each
    # the fp32 input and normalized values and rstd
    assert cfg.litgpt_norm and cfg.loss != "litgpt"
    norms = next(c for c in est.components if c.name.startswith("Activations: norms (RMSNorm"))
    assert "LitGPT's eager ops" in norms.name
    assert norms.bytes == 22 * 512 * 4 * 2 * (8 * 2048 + 4)
