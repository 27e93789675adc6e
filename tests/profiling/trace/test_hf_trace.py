"""Hugging Face configs traced: the estimate against the trace of our own blocks, per category,
for every variation; the real transformers module beside our blocks; mixtures of experts with
their routing assumption in the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

BASE = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
}  # fmt: skip
VARIANTS = {
    "llama": {"model_type": "llama", "tie_word_embeddings": True},
    "qwen2 (qkv bias)": {"model_type": "qwen2"},
    "qwen3 (head size, q/k norms per head)": {"model_type": "qwen3", "head_dim": 32},
    "olmo2 (post-norms, whole-width q/k norms)": {"model_type": "olmo2"},
    "gemma2 (GeGLU, sandwich norms, window, soft cap)": {
        "model_type": "gemma2",
        "head_dim": 32,
        "sliding_window": 16,
        "final_logit_softcapping": 30.0,
        "query_pre_attn_scalar": 32,
    },
    "mistral (sliding window)": {"model_type": "mistral", "sliding_window": 16},
    "mixtral (MoE top-2 of 4)": {
        "model_type": "mixtral",
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "qwen3_moe (MoE top-3 of 5, padded capacity)": {
        "model_type": "qwen3_moe",
        "head_dim": 16,
        "num_experts": 5,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 48,
    },
}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **config}), encoding="utf-8")
    return f"hf:{path}"


def _ratios(cfg: TrainingConfig, traced) -> dict[str, float]:
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    out = {c: est.category_bytes(c) / seen[c] for c in CATEGORIES}
    out["peak"] = est.per_gpu_bytes / traced.peak_bytes
    return out


@pytest.mark.parametrize(
    ("target", "precision"), [("cuda", "amp-bf16"), ("cuda", "mixed"), ("cpu", "amp-bf16")]
)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_estimate_agrees_with_our_blocks(
    tmp_path: Path, variant: str, target: str, precision: str
) -> None:
    cfg = TrainingConfig(
        model=_spec(tmp_path, VARIANTS[variant]),
        seq=64,
        batch=2,
        precision=precision,
        target=target,
    )
    with project_blocks():  # the estimate then models our blocks too
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
    assert traced.model_info["traced"] == "project blocks"
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(1.0, abs=0.02), (variant, name, ratio)


def test_moe_record_states_the_routing(tmp_path: Path) -> None:
    from profiling.records import RecordStore
    from profiling.trace.run import trace_and_record

    spec = _spec(tmp_path, VARIANTS["mixtral (MoE top-2 of 4)"])
    store = RecordStore(tmp_path / "measurements")
    run = trace_and_record(TrainingConfig(model=spec, seq=32, batch=1), store)
    record = store.load(run.payload["record_id"])
    info = record.config["model_info"]
    assert info["experts"] == 4 and info["experts_per_token"] == 2
    assert "balanced routing" in info["routing"] and "capacity factor 1" in info["routing"]
    assert info["traced"] == "project blocks"  # transformers' dispatch cannot run on fake values
    assert "routing: top-2 of 4 experts" in run.text()
    # All four experts' parameters are trained: gradients and optimizer state for each.
    assert record.config["model_info"]["params"] == run.result.params


def test_catalogue_model_agrees_per_category() -> None:
    """A shipped config at its real size (block-scaled trace of our blocks)."""
    cfg = TrainingConfig(model="hf:qwen2.5-0.5b", seq=256, batch=1, precision="amp-bf16")
    with project_blocks():
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
    assert traced.params == 494_032_768
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(1.0, abs=0.02), (name, ratio)


@pytest.mark.parametrize(
    "variant", ["llama", "qwen2 (qkv bias)", "qwen3 (head size, q/k norms per head)"]
)
def test_real_module_beside_our_blocks(tmp_path: Path, variant: str) -> None:
    """Both traced here: the same parameters, gradients and optimizer state to the byte; the
    activations of Hugging Face's eager ops at least ours."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path, VARIANTS[variant]), seq=64, batch=2,
                         precision="amp-bf16")  # fmt: skip
    real = trace_step(cfg)
    with project_blocks():
        ours = trace_step(cfg)
    assert real.model_info["traced"] == "transformers"
    assert "attn_implementation=sdpa" in real.model_info["implementation"]
    assert real.params == ours.params
    for category in ("parameters", "optimizer"):
        assert real.by_category[category] == ours.by_category[category]
    assert real.after_step["gradients"] == ours.after_step["gradients"]
    acts = ours.phases["after_forward"]["activations"] / real.phases["after_forward"]["activations"]
    print(f"{variant}: activations ours ÷ Hugging Face's = {acts:.3f}")
    # Hugging Face's RMSNorm is eager ops (each keeps its input), ours the fused kernel.
    assert 0.6 < acts <= 1.0
