"""Encoders (BERT, RoBERTa, ViT): read from config.json as transformers' classes read them,
counted to the parameter against transformers' own module of the task (masked LM, sequence or
image classification), traced as that module and estimated to the byte per category."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_config import catalogue_entry, load_hf, workload_from_config
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_encoders import BASE

FAMILIES = {
    "bert, masked LM": {"model_type": "bert", "architectures": ["BertForMaskedLM"]},
    "roberta, masked LM": {"model_type": "roberta", "type_vocab_size": 1, "pad_token_id": 1},
    "bert, classification of 2": {
        "model_type": "bert",
        "architectures": ["BertForSequenceClassification"],
    },
    "roberta, classification of 3": {
        "model_type": "roberta",
        "architectures": ["RobertaForSequenceClassification"],
        "id2label": {"0": "negative", "1": "neutral", "2": "positive"},
    },
    "roberta, regression": {
        "model_type": "roberta",
        "architectures": ["RobertaForSequenceClassification"],
        "num_labels": 1,
    },
    "vit, 32×32 images in 8×8 patches, 5 classes": {
        "model_type": "vit",
        "image_size": 32,
        "patch_size": 8,
        "num_labels": 5,
    },
}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
ENCODERS = ("bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large")
VITS = ("vit-base-patch16-224", "vit-large-patch16-224")


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **config}), encoding="utf-8")
    return f"hf:{path}"


def _agree(cfg: TrainingConfig, peak: float | None) -> None:
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert traced.model_info["traced"] == "transformers"
    assert any("transformers' own" in n and "estimate/encoder.py" in n for n in est.notes)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:  # to the byte
        assert est.category_bytes(category) == seen[category], category
    if peak is not None:  # the peak, inputs and buffers counted
        assert est.per_gpu_bytes == pytest.approx(traced.peak_bytes, rel=peak)
    # each phase's own highest moment too, where the estimate names one: a classifier's last
    # block's MLP in backward, its last output LayerNorm in forward under autocast, masked
    # LM's loss forward under autocast with full checkpointing
    named = {"backward, the last block's MLP": "backward",
             "forward, the last block's output LayerNorm": "forward"}  # fmt: skip
    if cfg.checkpointing == "full" and cfg.autocast:
        named = {"loss forward": "forward"}
    for moment in est.moments:
        if moment.name in named:
            assert moment.bytes == traced.phase_peaks[named[moment.name]], moment.name


RUNS = [("cuda", "amp-bf16", "none"), ("cuda", "mixed", "none"), ("cuda", "fp32", "none"),
        ("cpu", "mixed", "none"), ("cpu", "fp32", "none"), ("cuda", "amp-bf16", "full"),
        ("cuda", "bf16", "full")]  # fmt: skip


@pytest.mark.parametrize(("target", "precision", "checkpointing"), RUNS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_estimate_is_the_trace_of_transformers_module(
    tmp_path: Path, family: str, target: str, precision: str, checkpointing: str
) -> None:
    """Every saved tensor counted: q, k, v (one 16-bit copy of the block input each under
    autocast), the post-norms' inputs and statistics, CUDA's kernels' seeds, the embeddings'
    indices (RoBERTa numbers its positions per sequence), the masked-LM head and its 16-bit or
    fp32 log-probabilities, or the classifier that keeps the last hidden state whole through
    its first-token view without autocast."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    vit = family.startswith("vit")  # its sequence is the image's: 16 patches and the class token
    cfg = TrainingConfig(
        model=_spec(tmp_path, FAMILIES[family]), seq=None if vit else 64, batch=4 if vit else 2,
        precision=precision, target=target, checkpointing=checkpointing,
    )  # fmt: skip
    # the peak to the byte — a classifier's in the last block's backward, the step's inputs
    # and the position buffers counted; masked LM's under autocast with full checkpointing in
    # its loss, beside autocast's bias copies and the last hidden state (1.4 % low before)
    _agree(cfg, 0.0)


@pytest.mark.parametrize(("name", "precision"), [("roberta-base", "amp-bf16"),
                                                 ("bert-base-uncased", "mixed")])  # fmt: skip
def test_catalogue_size_estimate_is_the_trace(name: str, precision: str) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=f"hf:{name}", seq=128, batch=2, precision=precision)
    _agree(cfg, 0.0)


def test_classifier_peak_at_the_last_layernorm_is_the_trace(tmp_path: Path) -> None:
    """bert-base classifying sequences of 512 × 8 under autocast peaks in forward, as the last
    block's output LayerNorm writes its fp32 output (0.994 of the trace before it was modelled):
    the block's fp32 tensors, the MLP's output and the biases' cached copies counted."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    config = {**catalogue_entry("bert-base-uncased")["config"]}
    config["architectures"] = ["BertForSequenceClassification"]
    cfg = TrainingConfig(model=_spec(tmp_path, config), seq=512, batch=8, precision="amp-bf16")
    est = estimate(cfg)
    assert est.peak_moment == "forward, the last block's output LayerNorm"
    _agree(cfg, 0.0)


@pytest.mark.parametrize("name", ENCODERS)
def test_catalogue_counts_are_transformers_classes(name: str) -> None:
    """BertForMaskedLM / RobertaForMaskedLM built from the shipped config (meta tensors), and the
    classification class from the same config named so."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification

    raw = dict(catalogue_entry(name)["config"])
    kind = str(raw.pop("model_type"))
    tasks = ((AutoModelForMaskedLM, "ForMaskedLM"),
             (AutoModelForSequenceClassification, "ForSequenceClassification"))  # fmt: skip
    for auto, arch in tasks:
        config = {**catalogue_entry(name)["config"], "architectures": [f"X{arch}"]}
        with torch.device("meta"):
            model = auto.from_config(AutoConfig.for_model(kind, **raw, num_labels=2))
        real = sum(p.numel() for p in model.parameters())
        assert workload_from_config(config, name).param_count() == real, arch


@pytest.mark.parametrize("name", VITS)
def test_vit_counts_are_transformers_class(name: str) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    import torch
    from transformers import AutoConfig, AutoModelForImageClassification

    raw = dict(catalogue_entry(name)["config"])
    kind = str(raw.pop("model_type"))
    with torch.device("meta"):
        model = AutoModelForImageClassification.from_config(AutoConfig.for_model(kind, **raw))
    assert load_hf(f"hf:{name}").param_count() == sum(p.numel() for p in model.parameters())


def test_vit_at_its_size_is_the_trace() -> None:
    """ViT-B/16 on 224×224 images (197 tokens), batch 8, amp-bf16: the categories to the byte."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    _agree(TrainingConfig(model="hf:vit-base-patch16-224", batch=8), None)


@pytest.mark.parametrize(("batch", "precision"), [(64, "mixed"), (64, "amp-bf16"),
                                                  (16, "amp-bf16")])  # fmt: skip
def test_vit_peak_in_backward_is_the_trace(batch: int, precision: str) -> None:
    """ViT-B/16 at batch 64 peaks in the last block's MLP backward, the images (the step's
    input) alive: to the byte (mixed 0.984 of the trace before). Under autocast the output
    projection's backward first holds the gradient's 16-bit copy and its own 16-bit weight
    gradients, and the classifier's weight copy is gone (batch 64 0.998, 13 MB low, and batch
    16 1.0006 before)."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model="hf:vit-base-patch16-224", batch=batch, precision=precision)
    assert estimate(cfg).peak_moment == "backward, the last block's MLP"
    _agree(cfg, 0.0)


def test_published_counts_spelled_out() -> None:
    published = {"bert-base-uncased": 109_514_298, "bert-large-uncased": 335_174_458,
                 "roberta-base": 124_697_433, "roberta-large": 355_412_057,
                 "vit-base-patch16-224": 86_567_656,
                 "vit-large-patch16-224": 304_326_632}  # fmt: skip
    for name, count in published.items():
        assert load_hf(f"hf:{name}").param_count() == count


def test_readers_follow_the_config_classes() -> None:
    bert = workload_from_config({**BASE, "model_type": "bert"}, "b")
    assert (bert.arch, bert.type_vocab, bert.encoder_head, bert.tied_embeddings) == (
        "encoder", 2, "mlm", True)  # fmt: skip
    assert bert.max_seq == 130
    roberta = load_hf("hf:roberta-base")  # positions 2…513 of 514: 512 tokens
    assert (roberta.max_seq, roberta.positions, roberta.type_vocab) == (512, 514, 1)
    labelled = {**BASE, **FAMILIES["roberta, classification of 3"]}
    assert workload_from_config(labelled, "r").num_labels == 3
    with pytest.raises(ConfigError, match="seq 513 exceeds hf:roberta-base's maximum of 512"):
        TrainingConfig(model="hf:roberta-base", seq=513)
    vit = load_hf("hf:vit-base-patch16-224")  # 14 × 14 patches and the class token
    assert (vit.max_seq, vit.vocab, vit.num_labels, vit.encoder_head) == (197, 0, 1000, "classify")
    assert TrainingConfig(model="hf:vit-base-patch16-224").seq_or_default() == 197
    with pytest.raises(ConfigError, match=r"seq does not apply to hf:vit-base-patch16-224: its "
                       r"sequence is the image's patches and the class token, \(224 / 16\)² "
                       r"\+ 1 = 197; leave seq out"):  # fmt: skip
        TrainingConfig(model="hf:vit-base-patch16-224", seq=512)


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"position_embedding_type": "relative_key"}, "'relative_key' position embeddings"),
        ({"is_decoder": True}, "is a decoder"),
        ({"hidden_act": "relu"}, "hidden_act is 'relu'"),
    ],
)
def test_what_the_classes_have_and_we_do_not_is_refused(config: dict, said: str) -> None:
    with pytest.raises(ProfilingError, match=said):
        workload_from_config({**BASE, "model_type": "bert", **config}, "b")


def test_vit_configs_we_cannot_build_are_one_sentence() -> None:
    with pytest.raises(ProfilingError, match="image_size 30 does not divide by its patch_size 8"):
        workload_from_config({**BASE, "model_type": "vit", "image_size": 30, "patch_size": 8}, "v")
    with pytest.raises(ProfilingError, match="no q/k/v biases"):
        workload_from_config({**BASE, "model_type": "vit", "qkv_bias": False}, "v")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"loss": "litgpt"}, "is a decoder's LM loss"),
        ({"lora_rank": 8, "qlora": True}, "qlora on an encoder"),
        ({"lora_rank": 8, "lora_targets": ["gate"]}, "has no gate projection"),
        ({"compile": True}, "compile on an encoder"),
        ({"attention": "eager"}, "attention eager on an encoder"),
        ({"dropout": 0.1}, "dropout on an encoder"),
        ({"checkpointing": "selective"}, "checkpointing selective on an encoder"),
    ],
)
def test_options_that_do_not_apply_are_one_sentence(options: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        TrainingConfig(model="hf:bert-base-uncased", **options)


def test_no_blocks_of_our_own_without_transformers() -> None:
    """Without transformers (here: our blocks asked for) the trace says why in one sentence;
    the estimate still runs."""
    cfg = TrainingConfig(model="hf:bert-base-uncased", seq=32, batch=1)
    with project_blocks():
        with pytest.raises(ProfilingError, match="traced as transformers' own module only"):
            trace_step(cfg)
        assert estimate(cfg).per_gpu_bytes > 0


def test_fit_searches_what_an_encoder_can_train() -> None:
    """Full finetunes with no or full checkpointing (selective checkpointing is not modelled on
    encoders, nor LoRA's every setting: fit searched them and failed on the first LoRA candidate
    before)."""
    from profiling.fit import fit

    base = TrainingConfig(model="hf:bert-base-uncased", seq=128, gpu_mem=16)
    res = fit(base, confirm=0)
    assert res.fitting
    assert {c.config.lora_rank for c in res.fitting} == {None}
    assert {c.config.checkpointing for c in res.fitting} <= {"none", "full"}
