"""DeepSeek-V2 (multi-head latent attention, shared experts, a dense first layer) traced with
our blocks: exact model states beside the estimate, the record stating the routing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.hf_config import load_hf
from profiling.trace.step import trace_step

DEEPSEEK = {
    "model_type": "deepseek_v2", "vocab_size": 512, "hidden_size": 64,
    "intermediate_size": 160, "moe_intermediate_size": 32, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 2,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 32, "q_lora_rank": None,
    "qk_rope_head_dim": 8, "v_head_dim": 16, "qk_nope_head_dim": 16,
    "first_k_dense_replace": 1, "max_position_embeddings": 512,
}  # fmt: skip


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def test_deepseek_v2_lite_is_counted_exactly() -> None:
    w = load_hf("hf:deepseek-v2-lite")
    assert w.param_count() == 15_706_484_224  # the published 15.7B
    assert (w.kv_lora_rank, w.q_lora_rank, w.shared_experts, w.dense_layers) == (512, None, 2, 1)
    # Activated per token: everything but 58 of the 64 routed experts in 26 layers, and the
    # embedding lookup: 2.45B, published as 2.4B.
    expert = 3 * 2048 * 1408
    active = w.param_count() - 26 * 58 * expert - 102400 * 2048
    assert round(active / 1e9, 2) == 2.45


@pytest.mark.parametrize(
    ("q_lora_rank", "precision"),
    [(None, "amp-bf16"), (24, "amp-bf16"), (24, "mixed"), (None, "fp32")],
)
def test_latent_attention_estimate_agrees_with_the_trace(
    tmp_path: Path, q_lora_rank: int | None, precision: str
) -> None:
    spec = _spec(tmp_path, {**DEEPSEEK, "q_lora_rank": q_lora_rank})
    cfg = TrainingConfig(model=spec, seq=64, batch=2, precision=precision)  # target cuda
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert traced.model_info["traced"] == "project blocks"
    assert traced.params == est.params == load_hf(spec).param_count()
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in ("parameters", "gradients", "optimizer", "activations"):
        ratio = est.category_bytes(category) / seen[category]
        assert ratio == pytest.approx(1.0, abs=0.02), (category, ratio)
    assert est.per_gpu_bytes / traced.peak_bytes == pytest.approx(1.0, abs=0.02)
    # every latent tensor counted: under autocast CUDA keeps the latent norms' fp32 input copies
    acts = est.category_bytes("activations") / seen["activations"]
    assert acts == pytest.approx(1.0, abs=0.001), acts
    routing = traced.model_info["routing"]
    assert "2 shared experts run every token" in routing and "first 1 layers are dense" in routing


def test_the_cpu_targets_math_path_is_stated(tmp_path: Path) -> None:
    cfg = TrainingConfig(model=_spec(tmp_path, DEEPSEEK), seq=32, precision="mixed", target="cpu")
    assert any("falls back to its math path" in n for n in estimate(cfg).notes)
