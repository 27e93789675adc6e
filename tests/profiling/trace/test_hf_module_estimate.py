"""The estimate of transformers' own modules against their trace: per category, per family.

With transformers installed (CI installs the dev extras, which bring it), ``--model hf:…`` is
traced as the real ``AutoModelForCausalLM``; the estimate models that module's ops
(``profiling.estimate.hf_ops``). Small configs of each family, both targets, 16-bit autocast and
mixed precision: estimate ÷ trace within 2 % per category (the issue's bar), and the
activations to within 0.1 % — the closed forms describe every tensor the module keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("transformers", reason="the hf extra is not installed")

BASE = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
}  # fmt: skip
FAMILIES = {
    "llama (tied)": {"model_type": "llama", "tie_word_embeddings": True},
    "qwen2 (qkv bias)": {"model_type": "qwen2"},
    "qwen3 (head size 24, q/k norms per head)": {"model_type": "qwen3", "head_dim": 24},
    "olmo2 (post-norms, whole-width q/k norms)": {"model_type": "olmo2"},
    "phi3 (fused qkv and gate/up)": {"model_type": "phi3", "pad_token_id": None},
    "mistral (window 16 < seq)": {"model_type": "mistral", "sliding_window": 16},
    "gemma2 (GeGLU, tied, eager soft-capped attention, window)": {
        "model_type": "gemma2",
        "head_dim": 24,
        "sliding_window": 16,
        "final_logit_softcapping": 30.0,
        "query_pre_attn_scalar": 24,
    },
    "gpt2 (gelu_new, Conv1D)": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4},
    # transformers' expert dispatch cannot run on fake values: our blocks, estimated as such
    "mixtral (MoE top-2 of 4)": {
        "model_type": "mixtral",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "qwen3_moe (MoE top-3 of 5)": {
        "model_type": "qwen3_moe",
        "head_dim": 16,
        "num_experts": 5,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 48,
    },
}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, config: dict) -> str:
    gpt2 = {"vocab_size": 512, "n_positions": 512}
    data = {**gpt2, **config} if config["model_type"] == "gpt2" else {**BASE, **config}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"hf:{path}"


# both targets under both: CUDA's autocast lists (fp32 gelu_new, q/k norms) apply to cuda + amp
@pytest.mark.parametrize(
    ("target", "precision"),
    [("cuda", "amp-bf16"), ("cpu", "mixed"), ("cuda", "mixed"), ("cpu", "amp-bf16")],
)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_estimate_agrees_with_the_real_module(
    tmp_path: Path, family: str, target: str, precision: str
) -> None:
    cfg = TrainingConfig(
        model=_spec(tmp_path, FAMILIES[family]), seq=64, batch=2, precision=precision,
        target=target,
    )  # fmt: skip
    traced = trace_step(cfg)
    est = estimate(cfg)
    moe = "MoE" in family
    assert traced.model_info["traced"] == ("project blocks" if moe else "transformers")
    # The record says which module the activations describe.
    assert any(("transformers' own" in n) != moe for n in est.notes), est.notes
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    ratios = {c: est.category_bytes(c) / seen[c] for c in CATEGORIES}
    ratios["peak"] = est.per_gpu_bytes / traced.peak_bytes
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(1.0, abs=0.02), (family, name, ratio)
    assert ratios["activations"] == pytest.approx(1.0, abs=0.001), (family, ratios)


DROPOUT = {
    "gpt2 sdpa cuda amp-bf16": ("gpt2 (gelu_new, Conv1D)", "sdpa", "cuda", "amp-bf16"),
    "phi3 sdpa cuda mixed": ("phi3 (fused qkv and gate/up)", "sdpa", "cuda", "mixed"),
    "gpt2 eager cuda mixed": ("gpt2 (gelu_new, Conv1D)", "eager", "cuda", "mixed"),
    "llama eager cpu amp-bf16": ("llama (tied)", "eager", "cpu", "amp-bf16"),
    "gemma2 eager cpu fp32": (
        "gemma2 (GeGLU, tied, eager soft-capped attention, window)",
        "eager",
        "cpu",
        "fp32",
    ),
}


@pytest.mark.parametrize("case", list(DROPOUT))
def test_dropout_masks_are_the_modules_own(tmp_path: Path, case: str) -> None:
    """``--dropout 0.1`` in every dropout field: residual masks (GPT-2, Phi-3), the embeddings'
    (GPT-2), eager attention's masks; SDPA drops inside its kernel on CUDA."""
    family, attention, target, precision = DROPOUT[case]
    cfg = TrainingConfig(
        model=_spec(tmp_path, FAMILIES[family]), seq=64, batch=2, precision=precision,
        target=target, attention=attention, dropout=0.1,
    )  # fmt: skip
    traced = trace_step(cfg)
    assert "dropout 0.1" in traced.model_info["implementation"]
    est = estimate(cfg)
    ratio = est.category_bytes("activations") / traced.phases["after_forward"]["activations"]
    assert ratio == pytest.approx(1.0, abs=0.001), case


def test_eager_attention_is_the_modules_own(tmp_path: Path) -> None:
    """``--attention eager`` traces transformers' eager attention (s² probabilities kept)."""
    cfg = TrainingConfig(
        model=_spec(tmp_path, FAMILIES["llama (tied)"]), seq=64, batch=2,
        precision="amp-bf16", attention="eager",
    )  # fmt: skip
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert "attn_implementation=eager" in traced.model_info["implementation"]
    assert any(c.name.startswith("Activations: eager attention") for c in est.components)
    ratio = est.category_bytes("activations") / traced.phases["after_forward"]["activations"]
    assert ratio == pytest.approx(1.0, abs=0.001)


LAYERED = {
    "qwen2 amp-bf16 cuda": ("qwen2 (qkv bias)", {"precision": "amp-bf16"}),
    "gpt2 mixed cpu": ("gpt2 (gelu_new, Conv1D)", {"precision": "mixed", "target": "cpu"}),
    "gemma2 amp-bf16, eager window": (
        "gemma2 (GeGLU, tied, eager soft-capped attention, window)",
        {"precision": "amp-bf16"},
    ),
    # one layer is special here (a tied embedding's backward; OLMo 2's forward peak): 2, 3, 4
    "llama tied amp-bf16 cuda": ("llama (tied)", {"precision": "amp-bf16"}),
    "olmo2 mixed cuda": ("olmo2 (post-norms, whole-width q/k norms)", {"precision": "mixed"}),
    "qwen3 fp32 checkpointed": (
        "qwen3 (head size 24, q/k norms per head)",
        {"precision": "fp32", "checkpointing": "full"},
    ),
}


@pytest.mark.parametrize("case", list(LAYERED))
def test_layer_scaled_trace_equals_full_trace(tmp_path: Path, case: str) -> None:
    """transformers' module traced with 1, 2, 3 layers (or 2, 3, 4) and extrapolated to 5: every
    number the trace reports equals the trace of all 5 layers, byte for byte."""
    family, settings = LAYERED[case]
    config = dict(FAMILIES[family])
    config["n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"] = 5
    cfg = TrainingConfig(model=_spec(tmp_path, config), seq=32, batch=2, **settings)
    scaled = trace_step(cfg, block_scaling=True)
    full = trace_step(cfg, block_scaling=False)
    assert any(n.startswith("layer-scaled: ") for n in scaled.notes), scaled.notes
    assert not any("scaled" in n for n in full.notes)
    skip = {"wall_seconds", "notes"}
    assert scaled.model_dump(exclude=skip) == full.model_dump(exclude=skip)


# LoRA on transformers' RMSNorms that multiply the fp32 normalized values (Gemma's 1 + weight):
# a frozen norm weight wants no normalized output, 4 B per element, and the first block's
# first norm (fed by the frozen embedding) keeps not even its 1 + weight.
LORA_NORMS = {
    "gemma (MQA, head size 24)": {"model_type": "gemma", "head_dim": 24, "num_key_value_heads": 1},
    "llama": {"model_type": "llama"},
}


@pytest.mark.parametrize("precision", ["bf16", "mixed"])
@pytest.mark.parametrize("family", list(LORA_NORMS))
def test_lora_on_the_real_module_keeps_no_frozen_norm_output(
    tmp_path: Path, family: str, precision: str
) -> None:
    cfg = TrainingConfig(
        model=_spec(tmp_path, LORA_NORMS[family]), seq=64, batch=2, precision=precision,
        lora_rank=4,
    )  # fmt: skip
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert traced.model_info["traced"] == "transformers"
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for c in CATEGORIES:  # to the byte but the module's scalar buffers (a few hundred bytes)
        assert abs(est.category_bytes(c) - seen[c]) <= 512, (family, c, est.category_bytes(c))
