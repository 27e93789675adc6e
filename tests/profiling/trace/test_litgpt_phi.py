"""Phi as LitGPT's finetune scripts run it (``--loss litgpt``, ``--from`` a LitGPT yaml):
LitGPT's own GPT (litgpt/model.py at 00af8b0, the commit of its published phi-2 rows) — one
fused q/k/v Linear whose values SDPA reads as a view, the heads rotated after the transpose and
concatenated (q head-major: the output projection reads a copy), torch's fused tanh GELU —
traced as our blocks so laid out, estimated as such, with LoRA on the fused projection as
LitGPT's LoRAQKVLinear adapts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

TINY = {
    "model_type": "phi", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 512,
    "partial_rotary_factor": 0.5,
}  # fmt: skip
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
PHI_LORA = Path(__file__).parents[3] / "benchmarks/peer/configs/litgpt/phi-2__lora.yaml"


def _spec(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY), encoding="utf-8")
    return f"hf:{path}"


RUNS = [
    {"precision": "bf16"}, {"precision": "fp32"}, {"precision": "bf16", "target": "cpu"},
    {"precision": "bf16", "lora_rank": 8},
    {"precision": "bf16", "lora_rank": 8, "lora_dropout": 0.05,
     "lora_targets": ["q", "k", "v", "o", "up", "down", "lm_head"]},
    {"precision": "bf16", "lora_rank": 8, "target": "cpu"},
]  # fmt: skip


@pytest.mark.parametrize("run", RUNS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
def test_estimate_agrees_with_litgpt_layout(tmp_path: Path, run: dict) -> None:
    """Every category within 64 B, the peak within the step's inputs (not counted for any
    decoder) and 64 B; the trace builds LitGPT's layout, not transformers' PhiForCausalLM."""
    if run.get("lora_rank"):
        pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path), **{"seq": 64, "batch": 2, "loss": "litgpt", **run})
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert traced.model_info["traced"] == "project blocks"
    assert "LitGPT's own modules" in traced.model_info["implementation"]
    assert any("LitGPT's own Phi modules" in n for n in est.notes)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == pytest.approx(seen[category], abs=64), category
    assert abs(est.per_gpu_bytes - traced.peak_bytes) <= 2 * 2 * 64 * 8 + 64


def test_litgpt_layout_keeps_what_transformers_does_not(tmp_path: Path) -> None:
    """Per block LitGPT's Phi keeps the fused q/k/v output whole and the output projection's
    copy, and two f-wide tensors in the MLP where transformers' gelu_new keeps five."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    spec = _spec(tmp_path)
    ours = estimate(TrainingConfig(model=spec, seq=64, batch=2, precision="bf16", loss="litgpt"))
    hf = estimate(TrainingConfig(model=spec, seq=64, batch=2, precision="bf16", loss="chunked"))
    T, h, f, L = 128, 64, 160, 2

    def block(est: object, name: str) -> int:
        return sum(
            c.bytes for c in est.components if c.category == "activations" and name in c.name
        )

    assert block(ours, "MLP") == L * T * 2 * f * 2
    assert block(hf, "MLP") == L * T * 5 * f * 2
    # fused (3h), rotated q and k, output, logsumexp; the output projection's copy
    assert block(ours, "attention output's copy") == block(hf, "attention output's copy")
    assert block(ours, "attention (") == block(hf, "attention (") + L * T * 2 * h * 2


def test_from_litgpt_phi2_lora_yaml_reads_litgpt_modules() -> None:
    """LitGPT's phi-2 lora.yaml: --loss litgpt, so LitGPT's own modules — 4 GB less than
    transformers' PhiForCausalLM at the published micro-batch 4 × 512 (the rows' 1.28×)."""
    from profiling.recipes import read_recipe, with_recipe

    values = with_recipe(read_recipe([PHI_LORA]), {"seq": 512, "batch": 4})
    cfg = TrainingConfig.parse(**values)
    assert cfg.loss == "litgpt" and cfg.model == "hf:phi-2"
    est = estimate(cfg)
    assert any("LitGPT's own Phi modules" in n for n in est.notes)
    assert est.shape["neox"]["litgpt"] and est.shape["neox"]["fused_qkv"]
    # the MLP: 2 f-wide tensors a block, not gelu_new's 5 (2,560 × 10,240, 32 blocks)
    mlp = sum(c.bytes for c in est.components if c.name.startswith("Activations: the MLP"))
    assert mlp == 32 * 512 * 4 * 2 * 10240 * 2
