"""The few bytes a decoder's step holds beside its tensors: SDPA's seed and offset every layer
keeps (24 B flash, 16 B memory-efficient), the loss's two fp32 scalars, transformers' rotary
``inv_freq`` and ``original_inv_freq`` buffers, Falcon's key/value index tensors. The estimate
left them out (our Llama blocks 40-56 B, transformers' Llama 168-184 B below the trace at the
peak); now the activations and buffers after forward equal the trace's to the byte, and the
peak is never below it (profiling.estimate.step_scalars)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the hf extra is not installed")

from profiling.config import TrainingConfig
from profiling.estimate import recomputed_llama
from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import llama_spec
from tests.profiling.trace.tiny_neox import neox_spec

# (kind: "ours" our Llama blocks, "llama" transformers', else a tiny_neox kind; config)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "ours bf16": ("ours", {"precision": "bf16"}),  # flash: 24 B a layer
    "ours fp32": ("ours", {"precision": "fp32"}),  # memory-efficient: 16 B a layer
    "ours LoRA amp": ("ours", {"precision": "amp-bf16", "lora_rank": 8}),
    "ours full checkpointing": ("ours", {"precision": "bf16", "checkpointing": "full"}),
    "ours on the CPU": ("ours", {"precision": "bf16", "target": "cpu"}),  # no seeds
    "transformers' llama bf16": ("llama", {"precision": "bf16"}),
    "transformers' llama LoRA fp32": ("llama", {"precision": "fp32", "lora_rank": 8}),
    "gpt_neox bf16": ("gpt_neox", {"precision": "bf16"}),  # a quarter of the head rotated
    "phi LoRA fp32": ("phi", {"precision": "fp32", "lora_rank": 8}),
    "falcon-7b bf16": ("falcon-7b", {"precision": "bf16"}),  # masked: memory-efficient
    "falcon-40b LoRA fp32": ("falcon-40b", {"precision": "fp32", "lora_rank": 8}),
    "bloom bf16": ("bloom", {"precision": "bf16"}),  # its own attention: no seeds, no rotary
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_steps_scalars_and_buffers_are_counted_as_the_trace_holds_them(
    tmp_path: Path, case: str
) -> None:
    kind, extra = CASES[case]
    if extra.get("lora_rank"):
        pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    model = llama_spec(tmp_path) if kind in ("ours", "llama") else neox_spec(tmp_path, kind)
    cfg = TrainingConfig.model_validate({"model": model, "seq": 64, "batch": 2, **extra})
    with project_blocks() if kind == "ours" else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    seen = traced.phases["after_forward"]
    assert est.category_bytes("activations") == seen["activations"], case
    assert est.category_bytes("buffers") == seen.get("buffers", 0), case
    assert traced.after_step.get("buffers", 0) == seen.get("buffers", 0)  # the whole step
    if extra.get("checkpointing") != "full":  # (a recomputed block's moment: estimate.recomputed)
        assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes * 1.001, case


# a vocabulary half of h, SGD without momentum (no state): a recomputed block's MLP going back
# leads the step at every depth (estimate.recomputed_llama)
RECOMPUTED = {"model_type": "llama", "vocab_size": 64, "hidden_size": 128,
              "intermediate_size": 512, "num_attention_heads": 4,
              "max_position_embeddings": 512}  # fmt: skip


@pytest.mark.parametrize("layers", [2, 4, 8])
@pytest.mark.parametrize("ours", [True, False], ids=["ours", "transformers"])
@pytest.mark.parametrize("precision", ["bf16", "fp32"])  # flash 24 B, memory-efficient 16 B
def test_a_recomputed_block_holds_its_own_seed_alone(
    tmp_path: Path, layers: int, ours: bool, precision: str
) -> None:
    """Under full checkpointing no layer keeps its SDPA seed and offset from forward; the block
    recomputed in backward makes its own again, beside its other tensors: one block's, at every
    depth (the estimate was 24 B flash / 16 B memory-efficient below the trace, whatever L)."""
    model = llama_spec(tmp_path, {**RECOMPUTED, "num_hidden_layers": layers})
    cfg = TrainingConfig(model=model, seq=256, batch=2, precision=precision,
                         checkpointing="full", optimizer="sgd")  # fmt: skip
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == recomputed_llama.NAME
    assert est.per_gpu_bytes == traced.peak_bytes, est.per_gpu_bytes - traced.peak_bytes
    assert traced.phases["after_forward"]["activations"] == est.category_bytes("activations")


@pytest.mark.parametrize("ours", [True, False], ids=["ours", "transformers"])
@pytest.mark.parametrize("precision", ["bf16", "fp32", "amp-bf16"])
def test_selective_checkpointing_keeps_no_seed(tmp_path: Path, ours: bool, precision: str) -> None:
    """``--checkpointing selective`` checkpoints the attention core, SDPA's call under SDPA: its
    logsumexp, seed and offset are made again in backward, not kept (the trace runs the
    selective step: profiling.trace.selective)."""
    model = llama_spec(tmp_path, {**RECOMPUTED, "num_hidden_layers": 4})
    cfg = TrainingConfig(model=model, seq=64, batch=2, precision=precision)
    selective = cfg.model_copy(update={"checkpointing": "selective"})
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(selective), estimate(selective)
    assert est.category_bytes("activations") == traced.phases["after_forward"]["activations"]
