"""LoRA on encoder-decoders (T5 v1.0, Flan-T5, mT5): peft's adapters on transformers' own
T5ForConditionalGeneration — both stacks, the decoder's cross-attention too, as peft's default
targets for t5/mt5 (q, v) adapt it — traced and estimated to the byte per category and at the
peak; the adapters counted as peft counts them."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_t5 import LORA, categories_are_the_trace, lora_run, t5_config

ATTENTION = ["q", "k", "v", "o"]


def _cfg(tmp_path: Path, kind: str, **options: object) -> TrainingConfig:
    return t5_config(tmp_path, kind, **{**LORA, **options})


RUNS = [  # kind, precision, targets, lora_dropout, (seq, target, batch)
    ("flan-t5", "fp32", ["q", "v"], 0.0, (32, 24, 2)),
    ("flan-t5", "mixed", ["q", "v"], 0.0, (32, 24, 2)),
    ("flan-t5", "bf16", ["q", "v"], 0.0, (128, 96, 8)),  # the peak where activations lead
    ("t5 v1.0", "fp32", ["q", "v"], 0.1, (32, 24, 2)),
    ("t5 v1.0", "bf16", [*ATTENTION, "up", "down"], 0.05, (32, 24, 2)),
    ("t5 v1.0", "mixed", ["q", "v"], 0.1, (128, 96, 8)),
    ("flan-t5", "fp32", [*ATTENTION, "gate", "up", "down"], 0.0, (32, 24, 2)),
    ("mt5, q 72 wide", "mixed", ATTENTION, 0.0, (16, 40, 2)),
    ("mt5, q 72 wide", "fp32", ["q", "v"], 0.1, (128, 96, 8)),
    # a target much shorter than the input (PEFT's rows: tweets in, a label out): the peak is
    # the last decoder block's cross-attention, in its v (k) adapter or in its backward
    ("flan-t5", "fp32", ["q", "v"], 0.1, (128, 4, 8)),
    ("flan-t5", "bf16", ["q", "v"], 0.0, (128, 4, 8)),
    ("t5 v1.0", "mixed", ["q", "k", "o"], 0.0, (128, 4, 8)),
    ("t5 v1.0", "fp32", ATTENTION, 0.0, (128, 4, 8)),
    # autocast: fp32 norms, lora_A's 16-bit input copies, no frozen layer's 16-bit copies,
    # the adapters' weight copies (not the first blocks' frozen q, k, v nor their A)
    ("flan-t5", "amp-bf16", ["q", "v"], 0.0, (32, 24, 2)),
    ("t5 v1.0", "amp-bf16", ["q", "v"], 0.1, (32, 24, 2)),
    ("mt5, q 72 wide", "amp-fp16", ATTENTION, 0.0, (16, 40, 2)),
    ("t5 v1.0", "amp-bf16", [*ATTENTION, "up", "down"], 0.05, (32, 24, 2)),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "precision", "targets", "dropout", "lengths"), RUNS)
def test_estimate_is_the_trace_of_peft_on_transformers_t5(
    tmp_path: Path, kind: str, precision: str, targets: list, dropout: float, lengths: tuple
) -> None:
    """Each adapter's A output, its own input copy (mixed: peft's fp32 cast; lora_dropout's
    output) and mask, cross-attention's k and v adapters over the encoder's tokens; frozen
    layers keeping no inputs, frozen norms no normalized values, the frozen tables and
    embedding no indices, the causal mask gone, both first blocks' first norms keeping nothing:
    every category and the peak to the byte; where the target is short, the peak inside the
    last decoder block's cross-attention (its adapter's transients over the encoder's tokens,
    or its backward's q, k, v gradients) too."""
    cfg = lora_run(tmp_path, kind, precision, targets, dropout, lengths)
    traced, est = categories_are_the_trace(cfg)
    assert traced.model_info["lora"]["targets"] == targets
    assert est.per_gpu_bytes == traced.peak_bytes


def test_autocast_with_a_short_target_is_exact_per_category_and_safe_at_the_peak(
    tmp_path: Path,
) -> None:
    """Under autocast with a target much shorter than the input, every category equals the
    trace and the peak (the last cross-attention's v adapter) is not below it: within 1 %."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = _cfg(tmp_path, "flan-t5", precision="amp-bf16", lora_targets=["q", "v"],
               lora_dropout=0.1, seq=128, target_seq=4, batch=8)  # fmt: skip
    traced, est = categories_are_the_trace(cfg)
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.01 * traced.peak_bytes


def _peft_count(name: str, targets: list[str] | None) -> tuple[int, int]:
    """peft's get_peft_model on transformers' module (meta device): trainable parameters and
    adapted layers; ``targets`` None takes peft's own default for the model type."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    from profiling.models.hf_config import catalogue_entry

    raw = dict(catalogue_entry(name)["config"])
    config = AutoConfig.for_model(str(raw.pop("model_type")), **raw)
    with torch.device("meta"):
        model = AutoModelForSeq2SeqLM.from_config(config)
    lora = LoraConfig(r=8, lora_alpha=32, target_modules=targets, task_type="SEQ_2_SEQ_LM")
    peft_model = get_peft_model(model, lora)
    trained = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    layers = sum(1 for n, _ in peft_model.named_modules() if n.endswith("lora_A.default"))
    return trained, layers


@pytest.mark.parametrize(
    ("name", "targets"),
    [("flan-t5-xl", None), ("mt5-small", None), ("t5-small", ["q", "k", "v", "o", "wi", "wo"])],
)
def test_adapters_are_peft_s_count(name: str, targets: list[str] | None) -> None:
    """peft's default for t5/mt5 (q, v in every attention, cross-attention's too) and all linear
    layers of T5 v1.0: the estimate's trainable parameters are peft's to the parameter (mT5-small's
    q is 6 × 64 = 384 wide, not d_model's 512); T0_3B's shape (Flan-T5-XL's): 4,718,592."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    roles = {"wi": "up", "wo": "down"}
    ours = [roles.get(t, t) for t in targets] if targets else ["q", "v"]
    trained, _ = _peft_count(name, targets)
    cfg = TrainingConfig(model=f"hf:{name}", seq=64, lora_rank=8, lora_targets=ours)
    assert estimate(cfg).trainable_params == trained
    if name == "flan-t5-xl":
        assert trained == 4_718_592


def test_the_trace_adapts_what_peft_adapts(tmp_path: Path) -> None:
    """peft's default targets adapt 2 layers per encoder block and 4 per decoder block."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    traced = trace_step(_cfg(tmp_path, "flan-t5", precision="fp32", lora_targets=["q", "v"]))
    assert traced.model_info["lora"]["adapted_layers"] == 2 * 2 + 3 * 4


@pytest.mark.parametrize(
    ("options", "said"),
    [({"qlora": True, "precision": "mixed"}, "qlora on an encoder-decoder"),
     ({"dora": True}, "dora on an encoder-decoder"),
     ({"lora_targets": ["q", "lm_head"]}, "LoRA on lm_head on an encoder-decoder"),
     # audit7 D70: eager's s² scores were not counted, the estimate SDPA's (0.80-0.83)
     ({"attention": "eager"}, "attention eager on an encoder-decoder"),
     ({"attention": "eager", "lora_rank": None}, "attention eager on an encoder-decoder")],
)  # fmt: skip
def test_what_lora_on_t5_does_not_model_is_one_sentence(
    tmp_path: Path, options: dict, said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        _cfg(tmp_path, "flan-t5", **options)


@pytest.mark.parametrize(
    ("options", "said"),
    [({"target": "cpu", "precision": "bf16"}, "on the CPU target"),
     ({"lora_targets": ["o", "up"]}, "adapt at least one of q, k, v")],
)  # fmt: skip
def test_what_the_estimate_does_not_model_yet_is_one_sentence(
    tmp_path: Path, options: dict, said: str
) -> None:
    """Each names what to do instead (the trace runs them)."""
    with pytest.raises(ProfilingError, match=said):
        estimate(_cfg(tmp_path, "flan-t5", **options))


def test_a_gate_that_relu_t5_lacks_is_one_sentence(tmp_path: Path) -> None:
    """T5 v1.0's MLP has no gate: neither the estimate nor the trace counts adapters on it."""
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = _cfg(tmp_path, "t5 v1.0", precision="fp32", lora_targets=["q", "gate"])
    with pytest.raises(ProfilingError, match="has none; adapt up or down"):
        estimate(cfg)
    with pytest.raises(ProfilingError, match="has none; adapt up or down"):
        trace_step(cfg)
