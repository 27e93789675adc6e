"""Llama's kind of decoder with a vocabulary small next to its blocks (128 beside h 128, f 512,
seq 256 × 2): the last block's MLP going back (our blocks, transformers' Llama), transformers'
final RMSNorm going back, or under LoRA down's forward, not the loss, is the step's peak. The
estimate read 0.84-0.98 of the trace there (LoRA q,v bf16 0.900 ours / 0.920 transformers',
full bf16 0.976, LoRA q,down amp 0.839); now it is equal within the trace's few scalars
(profiling.estimate.llama_end)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import llama_end
from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import SMALL_VOCAB, llama_spec, wide_lora

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

SMALL = {**SMALL_VOCAB, "num_key_value_heads": 4}  # V 128; h 128, f 512, four key/value heads
# f = 2.5h, two key/value heads, three blocks, a vocabulary below h
WIDE = {**SMALL_VOCAB, "vocab_size": 96, "hidden_size": 256, "intermediate_size": 640,
        "num_hidden_layers": 3}  # fmt: skip
# (shape, our blocks or transformers', precision, LoRA targets or None for full training,
# lora_dropout, qlora, seq, batch); the old estimate's ratio to the trace in the comment
CASES = {
    "ours lora q,v bf16": ("small", True, "bf16", "q,v", 0.0, False, 256, 2),  # 0.900
    "ours lora q,v fp32 s64 b4": ("small", True, "fp32", "q,v", 0.0, False, 64, 4),
    "ours lora o,v,down fp32": ("small", True, "fp32", "o,v,down", 0.0, False, 256, 2),  # 0.922
    "ours lora k,up,lm_head bf16 dropout": (
        "small",
        True,
        "bf16",
        "k,up,lm_head",
        0.1,
        False,
        256,
        2,
    ),  # 0.930
    "ours qlora q,v bf16": ("small", True, "bf16", "q,v", 0.0, True, 256, 2),  # 0.889
    "ours full bf16": ("small", True, "bf16", None, 0.0, False, 256, 2),  # 0.974
    "ours full amp": ("small", True, "amp-bf16", None, 0.0, False, 256, 2),  # 0.983
    "ours full fp32": ("small", True, "fp32", None, 0.0, False, 256, 2),  # 0.938
    # down adapted: its forward leads (its input, the base's output, B's outputs)
    "ours lora all-linear bf16 dropout": (
        "small",
        True,
        "bf16",
        "all-linear",
        0.05,
        False,
        256,
        2,
    ),  # 0.965
    "ours lora o,v,down mixed": ("small", True, "mixed", "o,v,down", 0.0, False, 256, 2),  # 0.940
    "ours lora q,down amp dropout": (
        "small",
        True,
        "amp-bf16",
        "q,down",
        0.1,
        False,
        256,
        2,
    ),  # 0.839
    "ours wide lora v,lm_head amp": ("wide", True, "amp-bf16", "v,lm_head", 0.0, False, 256, 2),
    "ours wide lora o,v,down mixed dropout": (
        "wide",
        True,
        "mixed",
        "o,v,down",
        0.1,
        False,
        256,
        2,
    ),
    "transformers lora q,v bf16": ("small", False, "bf16", "q,v", 0.0, False, 256, 2),  # 0.920
    "transformers lora all-linear bf16 dropout": (
        "small",
        False,
        "bf16",
        "all-linear",
        0.05,
        False,
        256,
        2,
    ),  # 0.956
    "transformers lora q,v amp": ("small", False, "amp-bf16", "q,v", 0.0, False, 256, 2),
    "transformers lora v,down fp32 dropout": ("small", False, "fp32", "v,down", 0.1, False, 256, 2),
    "transformers lora q,down amp dropout": (
        "small",
        False,
        "amp-bf16",
        "q,down",
        0.1,
        False,
        256,
        2,
    ),
    "transformers full bf16": ("small", False, "bf16", None, 0.0, False, 256, 2),  # 0.976
    "transformers full amp": ("small", False, "amp-bf16", None, 0.0, False, 256, 2),  # 0.991
    "transformers full fp32": ("small", False, "fp32", None, 0.0, False, 256, 2),  # 0.952
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {name: llama_spec(tmp_path_factory.mktemp(name), shape)
            for name, shape in (("small", SMALL), ("wide", WIDE))}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_the_last_blocks_mlp_or_final_norm_equals_the_trace(
    models: dict[str, str], case: str
) -> None:
    shape, ours, precision, targets, dropout, qlora, seq, batch = CASES[case]
    lora = {"lora_rank": 8, "lora_targets": targets, "lora_dropout": dropout} if targets else {}
    cfg = TrainingConfig(
        model=models[shape], seq=seq, batch=batch, precision=precision, qlora=qlora, **lora
    )
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in (llama_end.MLP, llama_end.NORM, llama_end.FORWARD), case
    # never below: the trace's scalars and rotary buffers counted too (estimate.step_scalars)
    assert traced.peak_bytes <= est.per_gpu_bytes, case
    assert est.per_gpu_bytes <= traced.peak_bytes + 128, case


def test_a_large_vocabulary_keeps_the_loss_as_the_peak(tmp_path: Path) -> None:
    """At a real vocabulary the loss leads: the new moments are counted, below it."""
    model = llama_spec(tmp_path, {**SMALL, "vocab_size": 32000})
    cfg = TrainingConfig(model=model, seq=256, batch=2, lora_rank=8, precision="bf16")
    est = estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert llama_end.MLP in moments and llama_end.NORM in moments
    assert est.peak_moment not in (llama_end.MLP, llama_end.NORM)


def test_not_counted_where_something_else_runs_the_step(models: dict[str, str]) -> None:
    """Checkpointing (a recomputed block's own moment): not these moments (DoRA: on the
    attention alone test_llama_dora_attention, on down test_llama_dora_down); another loss goes
    back through its own (``losses.moments``), down's forward before it runs the same."""
    for extra in ({"checkpointing": "full"}, {"loss": "chunked"}):
        values: dict[str, object] = {"model": models["small"], "seq": 256, "batch": 2,
                                     "lora_rank": 8, "precision": "bf16", **extra}  # fmt: skip
        cfg = TrainingConfig.model_validate(values)
        names = {m.name for m in estimate(cfg).moments}
        assert llama_end.MLP not in names or extra.get("loss"), extra
        assert llama_end.NORM not in names or extra.get("loss"), extra
        assert llama_end.FORWARD not in names or extra.get("loss"), extra


# The wide toy (h 256, f 1024, V 256, 16 tokens; tests/profiling/trace/tiny_llama.py):
# (our blocks or transformers', precision, LoRA targets, lora_dropout, target)
WIDE_CASES = {
    # an adapted up's sum in forward, under `mixed`: B's fp32 output and the scaled one beside
    # the base's output; llama_end counted down's sum only (-49,200 B, 0.9908 of the trace)
    "ours mixed q,gate,up": (True, "mixed", "q,gate,up", 0.0, "cuda"),
    "ours mixed q,gate,up dropout": (True, "mixed", "q,gate,up", 0.1, "cuda"),
    "ours mixed v,up": (True, "mixed", "v,up", 0.0, "cuda"),
    "transformers mixed q,gate,up": (False, "mixed", "q,gate,up", 0.0, "cuda"),
    "transformers mixed v,up dropout": (False, "mixed", "v,up", 0.1, "cuda"),
    # on the CPU rms_norm runs as ops: the final norm keeps its fp32 input and rstd only
    "ours bf16 q,v cpu": (True, "bf16", "q,v", 0.0, "cpu"),
    "ours fp32 all-linear dropout cpu": (True, "fp32", "all-linear", 0.1, "cpu"),
    # ... and under `mixed` the block's input and the residual after attention stay 16-bit
    # locals beside the fp32 copies the norms keep: 16,384 B below the trace before
    "ours mixed all-linear dropout cpu": (True, "mixed", "all-linear", 0.1, "cpu"),
    "ours mixed v,up cpu": (True, "mixed", "v,up", 0.0, "cpu"),
    # under autocast only the first block's q, k, v A copies are cached unsaved (their input,
    # the frozen embedding's norm, needs no gradient): o's, gate's and up's were counted too,
    # 12,288 B above the trace
    "ours amp-fp16 all-linear dropout": (True, "amp-fp16", "all-linear", 0.1, "cuda"),
}


@pytest.mark.parametrize("case", list(WIDE_CASES))
def test_the_wide_toys_last_mlp_equals_the_trace(tmp_path: Path, case: str) -> None:
    ours, precision, targets, dropout, target = WIDE_CASES[case]
    cfg = wide_lora(tmp_path, precision, targets, dropout, target=target)
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in (llama_end.MLP, llama_end.NORM, llama_end.FORWARD), case
    # the trace's scalars and rotary buffers counted too (estimate.step_scalars): equal
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes, case


@pytest.mark.parametrize(
    ("precision", "targets"),
    [
        ("amp-bf16", "all-linear"),  # −1,336,312 B before (0.9442: the loss's moment read)
        ("mixed", "q,v"),  # −654,336 B (0.9457)
    ],
)
def test_qwen2s_biased_attention_takes_llamas_last_block_moments(
    tmp_path: Path, precision: str, targets: str
) -> None:
    """transformers' Qwen2 is Llama's block with q, k and v biased (``qkv_bias``, counted in
    the attention's terms): its last block's MLP and final norm are Llama's, and were left out
    (h 256, f 1024, V 256, 256 tokens: 0.944-0.946 of the trace)."""
    model = llama_spec(tmp_path, {**SMALL_VOCAB, "model_type": "qwen2", "vocab_size": 256,
                                  "hidden_size": 256, "intermediate_size": 1024})  # fmt: skip
    cfg = TrainingConfig(model=model, seq=256, batch=1, precision=precision, lora_rank=16,
                         lora_targets=targets, optimizer="sgd")  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in (llama_end.MLP, llama_end.NORM, llama_end.FORWARD)
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 128
