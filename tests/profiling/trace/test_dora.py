"""DoRA (peft's use_dora) traced with peft's own DoRA layers and estimated in closed form: what
DoRA adds to LoRA, per category and at the peak, is the same both ways to the byte; the
magnitude vectors count as peft counts them; what is not modelled is one sentence."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.estimate import recomputed_eager
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
FIXTURES = Path(__file__).parents[1] / "recipes" / "fixtures"

# (model, precision, QLoRA, targets, transformers' module): our blocks and transformers' Llama,
# the four precisions, a 16-bit and a 4-bit base, two adapters and all seven.
CASES = {
    "ours, bf16, q,v": ("tiny-llama", "bf16", False, "q,v", False),
    "ours, mixed, QLoRA, all-linear": ("tiny-llama", "mixed", True, "all-linear", False),
    "transformers, amp-bf16, all-linear": (LLAMA, "amp-bf16", False, "all-linear", True),
    "transformers, fp32, q,k,v,o": (LLAMA, "fp32", False, "q,k,v,o", True),
    # bitsandbytes returns its fp32 input's dtype under autocast: the base output kept is fp32
    "transformers, amp-bf16, QLoRA, q,v": (LLAMA, "amp-bf16", True, "q,v", True),
}


def _measure(cfg: TrainingConfig, hf: bool) -> tuple[dict[str, int], dict[str, int], object]:
    """(estimate's, trace's) bytes per category and at the peak, and the trace."""
    with contextlib.nullcontext() if hf else project_blocks():
        traced = trace_step(cfg)
        est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    estimated = {c: est.category_bytes(c) for c in CATEGORIES}
    estimated["peak"], seen["peak"] = est.per_gpu_bytes, traced.peak_bytes
    return estimated, {c: seen[c] for c in estimated}, traced


# With lora_dropout peft reruns each base layer on the dropped input (F.linear(x_dropped,
# weight.to(x.dtype))): its output in the input's dtype and, where the weight is cast (mixed's
# fp32 adapters, a 4-bit base, autocast), that weight's copy kept for x's gradient.
DROPOUT_CASES = {
    "ours, mixed, q,v": ("tiny-llama", "mixed", False, "q,v", False),
    "ours, amp-bf16, all-linear": ("tiny-llama", "amp-bf16", False, "all-linear", False),
    "ours, mixed, QLoRA, q,k,v,o": ("tiny-llama", "mixed", True, "q,k,v,o", False),
    "ours, bf16, all-linear": ("tiny-llama", "bf16", False, "all-linear", False),
    "transformers, amp-bf16, all-linear": (LLAMA, "amp-bf16", False, "all-linear", True),
    "transformers, fp32, q,k,v,o": (LLAMA, "fp32", False, "q,k,v,o", True),
    # under autocast the rerun dequantizes the 4-bit weight in 16 bits and keeps it
    "transformers, amp-bf16, QLoRA, all-linear": (LLAMA, "amp-bf16", True, "all-linear", True),
    "ours, amp-bf16, QLoRA, q,v": ("tiny-llama", "amp-bf16", True, "q,v", False),
}


# Outside the Llama family: Phi (GPT-NeoX's kind with q, k, v apart; every layer biased, its
# first block's MLP reading the frozen embedding's norm in parallel with attention) and Qwen2
# (q, k, v biased). Without dropout peft keeps base_result − bias, fp32 under autocast.
PHI = {
    "model_type": "phi", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 512,
    "partial_rotary_factor": 0.5,
}  # fmt: skip
QWEN2 = {**LLAMA, "model_type": "qwen2", "tie_word_embeddings": False}
OUTSIDE_CASES = {
    "phi, bf16, q,v": (PHI, "bf16", False, "q,v", 0.0),
    "phi, mixed, all six": (PHI, "mixed", False, "q,k,v,o,up,down", 0.0),
    "phi, amp-bf16, q,v,down": (PHI, "amp-bf16", False, "q,v,down", 0.0),
    "phi, amp-bf16, all six, dropout": (PHI, "amp-bf16", False, "q,k,v,o,up,down", 0.1),
    "phi, fp32, o,v,down, dropout": (PHI, "fp32", False, "o,v,down", 0.05),
    "phi, mixed, QLoRA, q,v,up, dropout": (PHI, "mixed", True, "q,v,up", 0.1),
    "phi, amp-bf16, QLoRA, q,v,up": (PHI, "amp-bf16", True, "q,v,up", 0.0),
    "qwen2, amp-bf16, q,k,v,o": (QWEN2, "amp-bf16", False, "q,k,v,o", 0.0),
}


@pytest.mark.parametrize("case", list(OUTSIDE_CASES))
def test_dora_outside_the_llama_family_adds_the_same(tmp_path: Path, case: str) -> None:
    model, precision, qlora, targets, dropout = OUTSIDE_CASES[case]
    _same_increment(tmp_path, case, (model, precision, qlora, targets, True), dropout)


@pytest.mark.parametrize("case", list(CASES))
def test_what_dora_adds_is_the_same_in_estimate_and_trace(tmp_path: Path, case: str) -> None:
    _same_increment(tmp_path, case, CASES[case], 0.0)


@pytest.mark.parametrize("case", list(DROPOUT_CASES))
def test_dora_with_dropout_adds_the_same_in_estimate_and_trace(tmp_path: Path, case: str) -> None:
    _same_increment(tmp_path, case, DROPOUT_CASES[case], 0.1)


def _same_increment(tmp_path: Path, case: str, spec: tuple, dropout: float) -> None:
    model, precision, qlora, targets, hf = spec
    if isinstance(model, dict):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(model), encoding="utf-8")
        model = f"hf:{path}"
    base = dict(model=model, seq=32, batch=2, precision=precision, lora_rank=8, qlora=qlora,
                lora_targets=targets, lora_dropout=dropout)  # fmt: skip
    lora_est, lora_trace, _ = _measure(TrainingConfig(**base), hf)
    cfg = TrainingConfig(**base, dora=True)
    dora_est, dora_trace, traced = _measure(cfg, hf)
    for name in dora_est:
        added_est = dora_est[name] - lora_est[name]
        added_trace = dora_trace[name] - lora_trace[name]
        assert added_est == added_trace, (case, name, added_est, added_trace)
        assert added_trace > 0, (case, name)
        assert dora_est[name] == pytest.approx(dora_trace[name], rel=2e-3), (case, name)
    # peft's magnitude vectors: one value per output feature of every adapted layer, trained
    # in the adapters' dtype beside A and B.
    lora = traced.model_info["lora"]  # type: ignore[attr-defined]  # a TraceResult
    assert lora["dora"] is True
    assert lora["adapter_params"] == estimate(cfg).trainable_params
    assert any("DoRA by peft" in n for n in traced.notes)  # type: ignore[attr-defined]


def test_magnitudes_count_as_peft_counts_them() -> None:
    """Llama 3.2 3B with MetaMathQA's adapter (r 32 on q and v) built by transformers on the
    meta device and adapted by peft with use_dora: its trainable parameters are the
    estimate's."""
    transformers = pytest.importorskip("transformers")
    import torch

    from profiling._quiet_import import import_quietly

    peft = import_quietly("peft")
    config = transformers.AutoConfig.for_model(
        "llama", hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
        num_attention_heads=24, num_key_value_heads=8, vocab_size=128256, head_dim=128,
        tie_word_embeddings=True,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    lora = peft.LoraConfig(r=32, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                           use_dora=True)  # fmt: skip
    model = peft.get_peft_model(model, lora)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    cfg = TrainingConfig(model="hf:llama-3.2-3b", seq=768, batch=4, precision="bf16",
                         lora_rank=32, lora_targets="q,v", dora=True)  # fmt: skip
    assert estimate(cfg).trainable_params == trained == 9_175_040 + 28 * (3072 + 1024)
    plain = TrainingConfig(**{**cfg.model_dump(exclude_defaults=True), "dora": False})
    assert estimate(plain).trainable_params == 9_175_040


def test_adapter_config_use_dora_is_read_and_torchtunes_is_listed(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe, with_recipe

    adapter = json.loads((FIXTURES / "peft" / "adapter_config.json").read_text(encoding="utf-8"))
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps({**adapter, "use_dora": True}), encoding="utf-8")
    recipe = read_recipe([path])
    assert recipe.values["dora"] is True
    values = with_recipe(recipe, {"model": "hf:llama-3.2-3b", "seq": 768, "batch": 4})
    with_dora = estimate(TrainingConfig.parse(**values))
    without = estimate(TrainingConfig.parse(**{**values, "dora": False}))
    assert with_dora.per_gpu_bytes > without.per_gpu_bytes
    assert any("DoRA" in c.name for c in with_dora.components)

    yaml_path = tmp_path / "lora.yaml"
    yaml_path.write_text(
        "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n"
        "  lora_attn_modules: ['q_proj', 'v_proj']\n  lora_rank: 8\n  lora_alpha: 16\n"
        "  use_dora: True\n",
        encoding="utf-8",
    )
    tune = read_recipe([yaml_path])
    assert "dora" not in tune.values  # torchtune's DoRALinear is its own, not modelled
    said = [s for s in tune.ignored if s.key == "model.use_dora"]
    assert said and "not modelled yet" in said[0].why


def test_what_is_not_modelled_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="dora needs lora_rank"):
        TrainingConfig(model="tiny-llama", dora=True)
    with pytest.raises(ProfilingError, match="peft's DoRA on a Llama-family model"):
        trace_step(TrainingConfig(model="hf:bert-base-uncased", lora_rank=8, dora=True))
    # a fused query_key_value is adapted as LitGPT's LoRAQKVLinear, which has no DoRA
    pythia = TrainingConfig(model="hf:pythia-1b", lora_rank=8, dora=True, seq=64)
    with pytest.raises(ProfilingError, match="not on a fused query_key_value"):
        trace_step(pythia)
    with pytest.raises(ProfilingError, match="DoRA outside the Llama family's blocks and Phi's"):
        estimate(pythia)


# DoRA with full checkpointing (was refused): the recomputed block's backward bound
# (profiling.estimate.recomputed_eager) with its largest weight norm rebuilt. The earlier bound
# (the end of forward and one block's kept tensors) was below the trace on these.
# a vocabulary small next to h: the recomputed block's backward, not the loss, is the peak
SMALL_VOCAB = {**LLAMA, "vocab_size": 128, "hidden_size": 128, "intermediate_size": 256}
FULL_CASES = {
    "ours, bf16, all-linear, dropout": ("bf16", "all-linear", 0.1, False),
    "ours, mixed, q,v": ("mixed", "q,v", 0.0, False),
    "transformers, fp32, q,k,v,o, dropout": ("fp32", "q,k,v,o", 0.1, True),
    "transformers, bf16, all-linear": ("bf16", "all-linear", 0.0, True),
}


@pytest.mark.parametrize("case", list(FULL_CASES))
def test_dora_with_full_checkpointing_is_never_below_the_trace(tmp_path: Path, case: str) -> None:
    precision, targets, dropout, hf = FULL_CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL_VOCAB), encoding="utf-8")
    cfg = TrainingConfig(model=f"hf:{path}", seq=64, batch=2, precision=precision, lora_rank=8,
                         lora_targets=targets, lora_dropout=dropout, dora=True,
                         checkpointing="full")  # fmt: skip
    est, seen, _ = _measure(cfg, hf)
    with contextlib.nullcontext() if hf else project_blocks():
        moments = estimate(cfg).moments
    assert max(moments, key=lambda m: m.bytes).name == recomputed_eager.NAME
    for name in CATEGORIES[:1] + CATEGORIES[2:]:  # what the step keeps: ids apart (≤ 520 B)
        assert 0 <= seen[name] - est[name] <= 520, (case, name)
    # safe, and not far: the bound counts the largest weight norm beside the whole block
    assert seen["peak"] <= est["peak"] <= 1.2 * seen["peak"], (case, est["peak"] / seen["peak"])
