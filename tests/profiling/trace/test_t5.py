"""Encoder-decoders (T5 v1.0, v1.1/Flan-T5, mT5): read from config.json as transformers reads
them, counted to the parameter against transformers' own T5ForConditionalGeneration /
MT5ForConditionalGeneration as from_pretrained loads a checkpoint, traced as that module with
a target length of its own, and estimated (parameters, gradients and optimizer to the byte)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_config import catalogue_entry, load_hf, workload_from_config
from profiling.trace.step import trace_step

BASE = {
    "vocab_size": 512, "d_model": 64, "d_ff": 160, "num_layers": 2, "num_decoder_layers": 3,
    "num_heads": 4, "d_kv": 16,
}  # fmt: skip
KINDS = {
    "t5 v1.0 (relu, tied and scaled head)": {"model_type": "t5"},
    "flan-t5 (gated gelu, own head)": {
        "model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
    },
    "mt5": {"model_type": "mt5", "tie_word_embeddings": False},
}  # fmt: skip
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **config}), encoding="utf-8")
    return f"hf:{path}"


def _loaded_count(raw: dict) -> int:
    """transformers' model from the config, its head untied as from_pretrained leaves a
    checkpoint whose head differs from its embedding (v1.1, mT5, Flan-T5)."""
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    raw = dict(raw)
    kind = raw.pop("model_type")
    untied = raw.get("tie_word_embeddings") is False
    config = AutoConfig.for_model(kind, **raw)
    with torch.device("meta"):
        model = AutoModelForSeq2SeqLM.from_config(config)
    n = sum(p.numel() for p in model.parameters())
    return n + (model.lm_head.weight.numel() if untied else 0)


@pytest.mark.parametrize(
    "name",
    ["t5-small", "t5-base", "flan-t5-small", "flan-t5-base", "flan-t5-large", "mt5-small",
     "mt5-base"],
)  # fmt: skip
def test_catalogue_counts_are_transformers(name: str) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    entry = catalogue_entry(name)
    assert load_hf(f"hf:{name}").param_count() == _loaded_count(entry["config"])


def test_published_counts_spelled_out() -> None:
    """Well-known sizes: t5-small's 60.5M (tied), Flan-T5's and mT5's own heads."""
    counts = {
        "t5-small": 60_506_624, "t5-base": 222_903_552, "flan-t5-small": 76_961_152,
        "flan-t5-base": 247_577_856, "mt5-small": 300_176_768, "mt5-base": 582_401_280,
    }  # fmt: skip
    for name, n in counts.items():
        assert load_hf(f"hf:{name}").param_count() == n


RUNS = [  # precision, input, target, target device
    ("mixed", 32, 24, "cuda"), ("bf16", 32, 24, "cuda"), ("fp32", 16, 40, "cuda"),
    ("amp-bf16", 32, 24, "cuda"), ("amp-fp16", 16, 40, "cuda"),
    ("mixed", 32, 24, "cpu"), ("fp32", 16, 40, "cpu"), ("amp-bf16", 32, 24, "cpu"),
]  # fmt: skip


@pytest.mark.parametrize(("precision", "seq", "target", "device"), RUNS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_trace_builds_transformers_module_and_the_estimate_is_it(
    tmp_path: Path, kind: str, precision: str, seq: int, target: int, device: str
) -> None:
    """The trace runs transformers' module with the head as a checkpoint loads it; the
    estimate's parameters, gradients, optimizer and activations equal it to the byte (each
    block's copy of the position bias, the causal masks, cross-attention's k and v of the
    encoder's output; under autocast each matmul's own 16-bit copy of an fp32 hidden state and
    the fp32 gelu_new; on the CPU the math path the trained bias sends self-attention to) and
    so does the peak (the loss's moments sized by the target, the step's input and target ids
    held), a target shorter or longer than the input."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    spec = _spec(tmp_path, KINDS[kind])
    cfg = TrainingConfig(
        model=spec, seq=seq, target_seq=target, batch=2, precision=precision, target=device
    )
    traced = trace_step(cfg)
    assert traced.model_info["traced"] == "transformers"
    w = load_hf(spec)
    width = 4 if precision == "fp32" or precision.startswith("amp-") else 2
    assert traced.phases["after_forward"]["parameters"] == width * w.param_count()
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == seen[category], category
    assert est.per_gpu_bytes == traced.peak_bytes
    longer = estimate(cfg.model_copy(update={"target_seq": 2 * target}))
    assert longer.category_bytes("activations") > est.category_bytes("activations")


def test_refusals_are_one_sentence(tmp_path: Path) -> None:
    spec = _spec(tmp_path, KINDS["mt5"])
    with pytest.raises(ConfigError, match="encoder-decoder"):
        TrainingConfig.parse(model=spec, seq=32, lora_rank=8, qlora=True, precision="mixed")
    with pytest.raises(ConfigError, match="target-seq"):
        TrainingConfig.parse(model="tiny-llama", seq=32, target_seq=16)
    with pytest.raises(ProfilingError, match="feed_forward_proj"):
        workload_from_config({**BASE, "model_type": "t5", "feed_forward_proj": "gated-silu"}, "x")


@pytest.mark.parametrize(
    ("kind", "precision", "device"),
    [("flan-t5 (gated gelu, own head)", "amp-bf16", "cuda"),
     ("t5 v1.0 (relu, tied and scaled head)", "amp-bf16", "cuda"),
     ("flan-t5 (gated gelu, own head)", "bf16", "cpu")],
)  # fmt: skip
def test_the_peak_where_activations_lead(
    tmp_path: Path, kind: str, precision: str, device: str
) -> None:
    """Long enough that the step's peak is the activations' (not the optimizer step's): the
    estimate's peak is the trace's to the byte under autocast and on the CPU."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path, KINDS[kind]), seq=128, target_seq=96, batch=8,
                         precision=precision, target=device)  # fmt: skip
    traced = trace_step(cfg)
    est = estimate(cfg)
    assert est.category_bytes("activations") == traced.phases["after_forward"]["activations"]
    assert est.per_gpu_bytes == traced.peak_bytes


def test_the_estimate_refuses_what_it_does_not_model_yet() -> None:
    """A full finetune under checkpointing is estimated on CUDA, autocast included
    (test_t5_ckpt_full); on the CPU target it is traced exactly but not estimated yet: one
    sentence, not a number in the unsafe direction."""
    for target, precision in (("cpu", "mixed"), ("cpu", "amp-bf16")):
        cfg = TrainingConfig(model="hf:flan-t5-small", seq=64, checkpointing="full",
                             target=target, precision=precision)  # fmt: skip
        with pytest.raises(ProfilingError, match="trace this step instead"):
            estimate(cfg)
    for precision in ("mixed", "amp-bf16"):
        cfg = TrainingConfig(model="hf:flan-t5-small", seq=64, checkpointing="full",
                             precision=precision)  # fmt: skip
        names = {m.name for m in estimate(cfg).moments}
        assert "backward, a recomputed decoder block" in names


def test_fit_searches_what_the_estimate_models() -> None:
    """Full finetunes in every precision, autocast included, with and without checkpointing
    (checkpointed under autocast too since it is estimated; no LoRA: fit failed with a
    traceback on the first LoRA candidate before)."""
    from profiling.fit import fit

    base = TrainingConfig(model="hf:flan-t5-base", seq=256, target_seq=64, gpu_mem=24)
    res = fit(base, confirm=0)
    assert res.fitting
    assert {c.config.lora_rank for c in res.fitting} == {None}
    assert {c.config.checkpointing for c in res.fitting} == {"none", "full"}
    assert any(c.config.checkpointing == "full" and c.config.precision.startswith("amp-")
               for c in res.fitting)  # fmt: skip
    assert any(c.config.precision.startswith("amp-") for c in res.fitting)


def test_fit_offers_lora_under_full_checkpointing() -> None:
    """LoRA on a T5 under full checkpointing is estimated (estimate.t5_ckpt, t5_mlp_ckpt): with
    the rank given, fit searches it too, and where only checkpointing fits it is the answer
    (fit found nothing before: it skipped every checkpointed LoRA candidate)."""
    from profiling.fit import fit

    base = TrainingConfig(model="hf:flan-t5-base", seq=1024, target_seq=256, gpu_mem=2,
                          lora_rank=8)  # fmt: skip
    res = fit(base, confirm=0)
    assert res.fitting
    assert {(c.config.checkpointing, c.config.lora_rank) for c in res.fitting} == {("full", 8)}
