"""LoRA and QLoRA traced with peft's own adapters: the estimate against the trace per category,
the frozen base (no gradients, no optimizer state), QLoRA's 4-bit base as it is represented,
and the real Hugging Face module under peft beside our blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
QWEN3 = {**LLAMA, "model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": False}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def _ratios(cfg: TrainingConfig, traced) -> dict[str, float]:
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    out = {c: est.category_bytes(c) / seen[c] for c in CATEGORIES}
    out["peak"] = est.per_gpu_bytes / traced.peak_bytes
    return out


CASES = {
    "tiny-llama, LoRA, amp-bf16, cuda": ("tiny-llama", "amp-bf16", False, "cuda", "none"),
    "tiny-llama, QLoRA, mixed, cpu": ("tiny-llama", "mixed", True, "cpu", "none"),
    "llama config, LoRA, bf16, cpu": (LLAMA, "bf16", False, "cpu", "none"),
    "qwen3 config, QLoRA, mixed, cuda, full checkpointing": (QWEN3, "mixed", True, "cuda", "full"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_estimate_agrees_with_the_lora_trace(tmp_path: Path, case: str) -> None:
    model, precision, qlora, target, checkpointing = CASES[case]
    spec = model if isinstance(model, str) else _spec(tmp_path, model)
    cfg = TrainingConfig(model=spec, seq=64, batch=2, precision=precision, lora_rank=8,
                         qlora=qlora, target=target, checkpointing=checkpointing)  # fmt: skip
    with project_blocks():  # the trace and the estimate of our blocks
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
        est = estimate(cfg)
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(1.0, abs=0.02), (case, name, ratio)
    lora = traced.model_info["lora"]
    # peft put A and B on q, k, v, o of both blocks; only they train.
    assert lora["adapted_layers"] == 8 and lora["peft"]
    assert lora["adapter_params"] == est.trainable_params
    adapter_bytes = 2 if precision == "bf16" else 4
    assert traced.after_step["gradients"] == est.trainable_params * adapter_bytes
    assert traced.params == est.params + est.trainable_params  # the base, unpacked, + adapters
    if qlora:
        assert "represented" in lora["base"] and lora["quantized_layers"] == 14
        assert any("bitsandbytes needs CUDA" in n for n in traced.notes)
        # NF4: less than the 16-bit base the plain LoRA trace keeps.
        sixteen_bit = est.params * 2 + est.trainable_params * adapter_bytes
        assert traced.phases["after_forward"]["parameters"] < 0.8 * sixteen_bit


def test_qlora_record_says_what_was_traced(tmp_path: Path) -> None:
    from profiling.records import RecordStore
    from profiling.trace.run import trace_and_record

    store = RecordStore(tmp_path / "m")
    cfg = TrainingConfig(model="tiny-llama", seq=32, batch=1, precision="bf16", lora_rank=4,
                         qlora=True)  # fmt: skip
    run = trace_and_record(cfg, store)
    info = store.load(run.payload["record_id"]).config["model_info"]
    assert info["lora"]["rank"] == 4 and "NF4" in info["lora"]["base"]
    assert "QLoRA: bitsandbytes needs CUDA" in run.text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "tiny-gpt2", "lora_rank": 8}, "a Llama-family model for --lora-rank"),
        (
            {"model": "tiny-llama", "lora_rank": 8, "qlora": True, "precision": "amp-bf16"},
            "--precision mixed or bf16 for --qlora",
        ),
    ],
)
def test_what_the_lora_trace_refuses_is_one_sentence(kwargs: dict, message: str) -> None:
    with pytest.raises(ProfilingError, match=message):
        trace_step(TrainingConfig(seq=16, batch=1, **kwargs))


@pytest.mark.parametrize(
    ("config", "precision", "qlora"), [(LLAMA, "amp-bf16", False), (QWEN3, "mixed", True)]
)
def test_real_module_under_peft(tmp_path: Path, config: dict, precision: str, qlora: bool) -> None:
    """transformers' own module with peft's adapters: the estimate of that module agrees per
    category; the model states equal our blocks' under the same adapters, to the byte."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path, config), seq=64, batch=2, precision=precision,
                         lora_rank=8, qlora=qlora)  # fmt: skip
    real = trace_step(cfg)
    assert real.model_info["traced"] == "transformers"
    assert real.model_info["lora"]["adapted_layers"] == 8
    for name, ratio in _ratios(cfg, real).items():
        assert ratio == pytest.approx(1.0, abs=0.02), (name, ratio)
    with project_blocks():
        ours = trace_step(cfg)
    assert real.params == ours.params
    for category in ("parameters", "optimizer"):
        assert real.by_category[category] == ours.by_category[category]
    assert real.after_step["gradients"] == ours.after_step["gradients"]
