"""BLOOM (bigscience/bloom-560m … 7b1): read from config.json as BloomConfig reads it, counted
to the parameter against BloomForCausalLM (tests/profiling/models/test_hf_config.py), traced as
transformers' own module (ALiBi, eager attention, GeLUFunction) and estimated op by op."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_config import load_hf, workload_from_config
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

TINY = {"model_type": "bloom", "vocab_size": 512, "hidden_size": 64, "n_layer": 2, "n_head": 4}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, **config: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, **config}), encoding="utf-8")
    return f"hf:{path}"


RUNS = [
    {"precision": "amp-bf16"}, {"precision": "mixed"}, {"precision": "fp32"},
    {"precision": "bf16"}, {"precision": "mixed", "target": "cpu"},
    {"precision": "mixed", "dropout": 0.1}, {"precision": "fp32", "dropout": 0.1},
    {"precision": "mixed", "dropout": 0.1, "target": "cpu"}, {"precision": "mixed", "batch": 1},
    {"precision": "mixed", "checkpointing": "full"}, {"precision": "fp32", "checkpointing": "full"},
    {"precision": "amp-bf16", "checkpointing": "full"},  # 0.80 and 0.905 of the trace's peak before
]  # fmt: skip


@pytest.mark.parametrize("run", RUNS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
def test_estimate_agrees_with_transformers_module(tmp_path: Path, run: dict) -> None:
    """Every category to the byte (activations: 8 B apart); the peak within 0.06 % — what is
    left is a few scalars (the step's token ids and labels, 2·b·s·8 B, are counted). fp32's
    peak is GeLUFunction's backward in the last block (five f-wide eager
    temporaries); without that moment the estimate was 34 KB low."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path), **{"seq": 64, "batch": 2, **run})
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert traced.model_info["traced"] == "transformers"
    assert any("estimate/bloom.py" in n for n in est.notes)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == pytest.approx(seen[category], abs=8), category
    if run.get("checkpointing") == "full":  # the recomputed block's backward: an upper bound
        assert any("recomputed BLOOM block" in n for n in est.notes)
        assert traced.peak_bytes <= est.per_gpu_bytes <= 1.2 * traced.peak_bytes
        return
    assert abs(est.per_gpu_bytes - traced.peak_bytes) <= 8


def test_readers_follow_bloom_config() -> None:
    """BloomConfig's names (n_layer, n_head; n_embed and num_attention_heads in the later
    checkpoints' configs), 4h MLP, tied head, biases everywhere, no rotary."""
    w = workload_from_config(
        {"model_type": "bloom", "vocab_size": 512, "n_embed": 96, "num_attention_heads": 6,
         "n_layer": 3}, "b")  # fmt: skip
    assert (w.hidden, w.heads, w.layers, w.ffn) == (96, 6, 3, 384)
    assert (w.alibi, w.embed_norm, w.tied_embeddings, w.linear_bias, w.fused_qkv) == (
        True, True, True, True, True)  # fmt: skip
    assert (w.residual, w.rotary, w.gelu) == ("sequential", 0, "tanh")
    h, V, L = 96, 512, 3  # embeddings + their LayerNorm, 12h² + 13h a block, the final norm
    assert w.param_count() == V * h + 2 * h + L * (12 * h * h + 13 * h) + 2 * h
    assert "ALiBi" in w.description and "rotary" not in w.description
    assert load_hf("hf:bloom-7b1").param_count() == 7_069_016_064


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"apply_residual_connection_post_layernorm": True}, "apply_residual_connection"),
        ({"slow_but_exact": True, "pretraining_tp": 2}, "slow_but_exact"),
    ],
)
def test_what_is_not_modelled_is_one_sentence(config: dict, said: str) -> None:
    with pytest.raises(ProfilingError) as err:
        workload_from_config({**TINY, **config}, "x")
    assert said in str(err.value) and "\n" not in str(err.value)


def test_no_blocks_of_ours(tmp_path: Path) -> None:
    """BLOOM is traced as transformers' module only: asked for our blocks, one sentence."""
    cfg = TrainingConfig(model=_spec(tmp_path), seq=32, batch=1)
    with project_blocks(), pytest.raises(ProfilingError, match="transformers' own module"):
        trace_step(cfg)


LORA_RUNS = [
    {"precision": "mixed"},
    {"precision": "mixed", "lora_targets": ["q", "k", "v", "o", "up", "down"]},
    {"precision": "fp32", "lora_targets": ["q", "k", "v", "o", "up", "down", "lm_head"]},
    {"precision": "bf16", "lora_dropout": 0.1, "lora_targets": ["q", "o", "down"]},
    {"precision": "mixed", "target": "cpu"},
    {"precision": "mixed", "qlora": True},
    {"precision": "mixed", "qlora": True, "bnb_keeps_inputs": True},
]


@pytest.mark.parametrize("run", LORA_RUNS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
def test_lora_estimate_agrees_with_peft_on_transformers_module(tmp_path: Path, run: dict) -> None:
    """LoRA and QLoRA on BLOOM's query_key_value (LitGPT's adapter of its slices), dense,
    dense_h_to_4h and dense_4h_to_h: the frozen layers keep no inputs — _merge_heads' copy
    included, unless o's adapter keeps it — the LayerNorm on the frozen embedding keeps nothing,
    GeLUFunction keeps its input all the same. Categories to the byte (activations 8 B apart;
    50 KB over before the two BLOOM rules), the peak within the step's inputs."""
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path), **{"seq": 64, "batch": 2, "lora_rank": 8, **run})
    traced = trace_step(cfg)
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == pytest.approx(seen[category], abs=8), category
    assert abs(est.per_gpu_bytes - traced.peak_bytes) <= 2 * 2 * 64 * 8 + 8


def test_peft_adapter_config_names_bloom_modules(tmp_path: Path) -> None:
    """peft's target_modules on BLOOM (its examples' query_key_value, dense, dense_h_to_4h,
    dense_4h_to_h) read as the roles; the estimate models them."""
    from profiling.recipes import read_recipe, with_recipe

    adapter = tmp_path / "adapter_config.json"
    names = ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]
    adapter.write_text(json.dumps({"peft_type": "LORA", "r": 16, "target_modules": names}))
    values = with_recipe(read_recipe([adapter]), {"model": "hf:bloom-560m", "seq": 256})
    cfg = TrainingConfig.parse(**values)
    assert cfg.lora_targets == ["q", "k", "v", "o", "up", "down"]
    est = estimate(cfg)
    # per block: A and B of q, k, v (the fused projection's three slices), o, up and down
    h, f, r = 1024, 4096, 16
    assert est.trainable_params == 24 * r * (3 * (h + h) + (h + h) + (h + f) + (f + h))
