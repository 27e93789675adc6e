"""LoRA on encoders (BERT, RoBERTa, ViT): peft's adapters on transformers' own module, the
classifier trained as peft's modules_to_save, traced and estimated to the byte per category and
at the peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from tests.profiling.trace.tiny_encoders import BASE, estimate_is_trace

FAMILIES = {
    "bert, masked LM": {"model_type": "bert", "architectures": ["BertForMaskedLM"]},
    "bert, classification of 2": {
        "model_type": "bert",
        "architectures": ["BertForSequenceClassification"],
    },
    "roberta, classification of 3": {
        "model_type": "roberta",
        "type_vocab_size": 1,
        "pad_token_id": 1,
        "num_labels": 3,
        "architectures": ["RobertaForSequenceClassification"],
    },
    "vit, 5 classes": {"model_type": "vit", "image_size": 32, "patch_size": 8, "num_labels": 5},
}
ALL = ["q", "k", "v", "o", "up", "down"]


def _cfg(tmp_path: Path, family: str, **options: object) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **FAMILIES[family]}), encoding="utf-8")
    vit = family.startswith("vit")
    return TrainingConfig(
        model=f"hf:{path}", seq=None if vit else 64, batch=4 if vit else 2, lora_rank=8,
        **options,  # type: ignore[arg-type]  # the test's own keyword options
    )  # fmt: skip


RUNS = [("bert, masked LM", p, t) for p in ("amp-bf16", "bf16", "fp32") for t in ("q,v", "all")]
RUNS += [(f, "amp-bf16", t) for f in FAMILIES if "masked" not in f for t in ("q,v", "attn+up")]
TARGETS = {"q,v": ["q", "v"], "all": ALL, "attn+up": ["q", "k", "v", "o", "up"]}


@pytest.mark.parametrize(("family", "precision", "targets"), RUNS)
def test_estimate_is_the_trace_of_peft_on_transformers_module(
    tmp_path: Path, family: str, precision: str, targets: str
) -> None:
    """Adapters' A outputs and inputs (autocast's copies), frozen layers keeping no inputs, the
    frozen embeddings keeping nothing (ViT's first LayerNorm neither), the first block's weight
    copies, BERT's frozen pooler; the peak — at the last block's output LayerNorm, the last
    LayerNorm's backward or the loss — to the byte."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = _cfg(tmp_path, family, precision=precision, lora_targets=TARGETS[targets])
    traced, _ = estimate_is_trace(cfg)
    assert traced.model_info["lora"]["targets"] == TARGETS[targets]
    saved = traced.model_info["lora"]["modules_to_save"]
    assert saved == ([] if "masked" in family else ["classifier"])


def test_masked_lm_in_mixed_precision_is_the_trace(tmp_path: Path) -> None:
    """bf16 weights, fp32 adapters (peft's cast of each adapter's input: a copy of its own)."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = _cfg(tmp_path, "bert, masked LM", precision="mixed", lora_targets=ALL)
    estimate_is_trace(cfg)


def test_the_classifier_trains_as_peft_s_copy(tmp_path: Path) -> None:
    """The classifier's trained copy: its gradients and AdamW's two states beside the adapters',
    the frozen original still held (RoBERTa's whole classification head)."""
    cfg = _cfg(tmp_path, "roberta, classification of 3", precision="amp-bf16", lora_targets=["q"])
    est = estimate(cfg)
    h, n, r, L = 64, 3, 8, 2
    trained = L * r * (h + h) + h * h + h + h * n + n
    assert est.category_bytes("gradients") == trained * 4
    assert est.trainable_params == trained


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"lora_targets": ["q", "gate"]}, "has no gate projection and no LM head"),
        ({"precision": "mixed"}, "modules_to_save copy of the classifier stays 16-bit"),
        ({"qlora": True}, "qlora on an encoder"),
        ({"lora_dropout": 0.1}, "lora_dropout on an encoder"),
    ],
)
def test_what_lora_on_an_encoder_does_not_model_is_one_sentence(
    tmp_path: Path, options: dict, said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        _cfg(tmp_path, "bert, classification of 2", **options)


def test_the_cpu_target_is_one_sentence(tmp_path: Path) -> None:
    """It names what to do instead (the trace runs it)."""
    with pytest.raises(ProfilingError, match="on the CPU target"):
        estimate(_cfg(tmp_path, "bert, masked LM", target="cpu"))


def test_vit_base_at_its_size_is_the_trace() -> None:
    """ViT-B/16 with peft's published image-classification recipe's targets (query, value; the
    classifier saved), batch 32, amp-bf16: every category and the peak to the byte."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = TrainingConfig(
        model="hf:vit-base-patch16-224", batch=32, precision="amp-bf16", lora_rank=16,
        lora_targets=["q", "v"],
    )  # fmt: skip
    estimate_is_trace(cfg)
