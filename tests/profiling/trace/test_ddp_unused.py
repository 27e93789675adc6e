"""DDP with find_unused_parameters=True (``--ddp-find-unused``), as the Hugging Face Trainer
wraps a transformers model without gradient checkpointing (transformers 5.24
``Trainer._build_accelerator_args``): torch 2.13's Reducer keeps an int32 map of the parameters
used on the GPU (``c10d/reducer.cpp`` ``initialize_local_used_map``, run only with find_unused)
and ``_DDPSink`` clones every output of the wrapped model at forward's end
(``torch/nn/parallel/distributed.py`` ``_post_forward``): for a transformers model given its
labels, the logits a second time beside the first. Estimated as traced, to the byte; the
Trainer's files say when."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.ddp_unused import SINK
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step


def _hf(tmp_path: Path, **config: object) -> str:
    """A transformers config.json under ``tmp_path``, as --model takes it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"tie_word_embeddings": False, **config}), encoding="utf-8")
    return f"hf:{path}"


def _llama(tmp_path: Path, vocab: int, hidden: int = 64, layers: int = 1) -> str:
    """transformers' Llama (2 of 4 heads for keys and values, f = 2h)."""
    return _hf(tmp_path, model_type="llama", vocab_size=vocab, hidden_size=hidden,
               intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip


def test_the_sinks_clone_of_the_logits_leads_a_large_vocabulary(tmp_path: Path) -> None:
    # V 4,096 over h 64 in fp32: the loss's moments lead, and the sink's (end of forward, the
    # logits and their clone, 2·s·b·V·4 B) passes the loss backward's (2·s·b·V·4 B less the
    # shifted labels nll_loss let go)
    base = {"model": _llama(tmp_path, 4096), "seq": 64, "batch": 2, "precision": "fp32",
            "gpus": 2}  # fmt: skip
    plain, unused = TrainingConfig(**base), TrainingConfig(**base, ddp_find_unused=True)
    est, traced = estimate(unused), trace_step(unused)
    assert est.peak_moment == SINK
    assert est.per_gpu_bytes == traced.peak_bytes == traced.phase_peaks["forward"]
    before = trace_step(plain)
    tensors = 1 + 9 + 2  # the embedding, one block's 9, the final norm and the (untied) head
    assert traced.by_category["buckets"] == before.by_category["buckets"] + 4 * tensors
    logits = 64 * 2 * 4096 * 4
    # the forward's peak was the loss's (logits and their fp32 log-softmax), now both logits
    assert traced.phase_peaks["forward"] > before.phase_peaks["forward"] + logits // 2
    assert estimate(plain).per_gpu_bytes == before.peak_bytes < traced.peak_bytes


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "mixed"])
def test_the_sink_under_compile(tmp_path: Path, precision: str) -> None:
    # torch.compile of the DDP module (accelerate compiles after it wraps) compiles the module
    # underneath alone: DDP's forward, _post_forward and _DDPSink run eagerly around it (torch
    # 2.13 distributed.py _inside_ddp_forward, "marked 'skip' in torchdynamo"), so the sink
    # clones the compiled model's outputs as it clones the eager one's; in fp32 on V 4,096
    # its moment leads the compiled step too
    cfg = TrainingConfig(model=_llama(tmp_path, 4096), seq=64, batch=2, precision=precision,
                         gpus=2, ddp_find_unused=True, compile=True)  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.category_bytes("buckets") == traced.by_category["buckets"]
    assert est.per_gpu_bytes == traced.peak_bytes
    assert (est.peak_moment == SINK) == (precision == "fp32")


@pytest.mark.parametrize(
    ("precision", "extra"),
    [
        ("fp32", {}),
        ("amp-bf16", {}),
        ("mixed", {}),
        ("bf16", {}),
        ("fp32", {"lora_rank": 4}),  # the adapters' tensors alone in the map
        ("amp-bf16", {"checkpointing": "full"}),  # given: the Trainer would not pass it
        ("bf16", {"loss": "liger"}),  # no logits: the loss alone cloned
    ],
)
def test_find_unused_estimated_as_traced(tmp_path: Path, precision: str, extra: dict) -> None:
    cfg = TrainingConfig(model=_llama(tmp_path, 256, hidden=128, layers=2), seq=64, batch=2,
                         precision=precision, gpus=2, ddp_find_unused=True, **extra)  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.category_bytes("buckets") == traced.by_category["buckets"]
    sink = next(m for m in est.moments if m.name == SINK)
    assert sink.bytes <= traced.phase_peaks["forward"]  # a moment of the forward
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-gpt2"])
def test_a_model_of_our_own_returns_its_loss_alone(model: str) -> None:
    # the module DDP wraps returns the loss (a scalar): its clone is 4 B
    cfg = TrainingConfig(model=model, seq=32, batch=2, precision="fp32", gpus=2,
                         ddp_find_unused=True, target="cpu")  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes
    assert est.category_bytes("buckets") == traced.by_category["buckets"]


def test_t5_clones_its_logits_and_its_encoders_output(tmp_path: Path) -> None:
    # Seq2SeqLMOutput: the loss, the logits and encoder_last_hidden_state, each cloned; the
    # sink's moment is the forward's peak here (was counted as the loss's clone alone)
    model = _hf(tmp_path, model_type="t5", vocab_size=128, d_model=128, d_ff=512,
                num_layers=1, num_decoder_layers=1, num_heads=4, d_kv=16,
                feed_forward_proj="gated-gelu")  # fmt: skip
    cfg = TrainingConfig(model=model, seq=32, batch=2, precision="fp32", gpus=2,
                         ddp_find_unused=True)  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    sink = next(m for m in est.moments if m.name == SINK)
    assert sink.bytes == traced.phase_peaks["forward"]
