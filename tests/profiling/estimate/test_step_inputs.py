"""The step's token ids and labels (int64, held the whole step) and transformers' position ids
kept under full checkpointing: counted by the estimate where the trace holds them, in the
trace's category."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

pytest.importorskip("torch")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import llama_spec

# (model, transformers' module, extra config): our blocks and transformers' Llama, eager and
# compiled, with and without full checkpointing, full training and LoRA
CASES: dict[str, tuple[str, bool, dict[str, Any]]] = {
    "ours llama, bf16": ("tiny-llama", False, {}),
    "ours gpt2, mixed, full checkpointing": ("tiny-gpt2", False, {"checkpointing": "full",
                                                                  "precision": "mixed"}),
    "ours llama, LoRA, full checkpointing": ("tiny-llama", False, {"lora_rank": 8,
                                                                   "checkpointing": "full"}),
    "ours llama, LoRA, compiled": ("tiny-llama", False, {"lora_rank": 8, "compile": True}),
    "transformers' llama, bf16": ("hf", True, {}),
    "transformers' llama, full checkpointing": ("hf", True, {"checkpointing": "full"}),
    "transformers' llama, LoRA, compiled, full checkpointing": (
        "hf", True, {"lora_rank": 8, "compile": True, "checkpointing": "full"}),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_the_step_s_inputs_are_counted_where_the_trace_holds_them(tmp_path, case) -> None:
    model, hf, extra = CASES[case]
    if hf:
        pytest.importorskip("transformers")
        model = llama_spec(tmp_path)
    if extra.get("lora_rank"):
        pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    seq, batch = 32, 2
    cfg = TrainingConfig(model=model, seq=seq, batch=batch, **{"precision": "bf16", **extra})
    with contextlib.nullcontext() if hf else project_blocks():
        traced = trace_step(cfg)
        est = estimate(cfg)
    seen = traced.phases["after_forward"]
    # the token ids and the labels, in the trace's own category, the whole step
    assert seen["inputs"] == 2 * seq * batch * 8
    assert est.category_bytes("inputs") == seen["inputs"], case
    assert traced.after_step["inputs"] == seen["inputs"]
    # the activations to the byte: transformers' position ids under full checkpointing, the
    # loss's scalars and SDPA's seeds (estimate.step_scalars) counted; the rotary buffers too
    assert seen["activations"] == est.category_bytes("activations"), case
    assert est.category_bytes("buffers") == seen.get("buffers", 0), case
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes * 1.001, case


BASE = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512,
}  # fmt: skip
QLORA = {
    "lora_rank": 8,
    "lora_targets": ["q", "v"],
    "lora_dropout": 0.05,
    "qlora": True,
    "bnb_keeps_inputs": True,
    "fabric_bnb": True,
    "loss": "litgpt",
    "tied_head": False,
}
# (config.json, our blocks, training config): where the ids were counted before, the estimate
# stood above the trace at the loss by what the trace no longer (or not yet) held there
LOSSES: dict[str, tuple[dict[str, Any], bool, dict[str, Any]]] = {
    # transformers' loss: the padded labels beside their shifted copy in forward; nll_loss's
    # backward releases the copy before log-softmax's backward
    "transformers' loss, untied head": (
        {"model_type": "llama", "num_key_value_heads": 2, "tie_word_embeddings": True}, False,
        {"tied_head": False}),
    # transformers' Falcon: its causal mask is one s² expanded over the batch
    "Falcon, LitGPT's loss": ({"model_type": "falcon"}, False, {"loss": "litgpt"}),
    # one 128-token chunk is the hidden states themselves: no strided copy for the 4-bit head
    "GPT-NeoX QLoRA, Lightning's 4-bit head": (
        {"model_type": "gpt_neox", "use_parallel_residual": False}, False, QLORA),
    # LitGPT's adapted head: a later chunk's A output and dropout mask are not made yet
    "LitGPT's adapted head, three chunks": (
        {"model_type": "llama", "num_key_value_heads": 2}, True,
        {"seq": 320, "loss": "litgpt", "lora_rank": 8, "lora_targets": ["q", "v", "lm_head"],
         "lora_dropout": 0.05, "qlora": True, "bnb_keeps_inputs": True}),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", list(LOSSES))
def test_the_loss_s_moments_hold_what_the_trace_holds(tmp_path, case) -> None:
    pytest.importorskip("transformers")
    config, blocks, extra = LOSSES[case]
    if extra.get("lora_rank"):
        pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **config}), encoding="utf-8")
    cfg = TrainingConfig(**{"model": f"hf:{path}", "seq": 64, "batch": 2, "precision": "bf16",
                            "target": "cuda", **extra})  # fmt: skip
    with project_blocks() if blocks else contextlib.nullcontext():
        traced = trace_step(cfg)
        est = estimate(cfg)
    assert traced.by_category["inputs"] == est.category_bytes("inputs")  # held at the peak too
    moments = {m.name: m.bytes for m in est.moments}
    # the loss forward and the step's peak each below the trace by a few scalars, not above
    assert 0 <= traced.phase_peaks["forward"] - moments["loss forward"] <= 256, case
    assert 0 <= traced.peak_bytes - est.per_gpu_bytes <= 256, case


@pytest.mark.parametrize("optimizer", ["sgd", "adam8bit"])
def test_the_tied_end_of_backward_holds_the_step_s_inputs(optimizer: str) -> None:
    """GPT-2 under full checkpointing with an optimizer whose step is not the highest: the end
    of backward (the tied embedding's gradient summed) holds the token ids and labels too, as
    the trace does (it was 2·s·b·8 B below)."""
    cfg = TrainingConfig(
        model="gpt2-small", seq=128, batch=2, precision="fp32", checkpointing="full",
        optimizer=optimizer,
    )  # fmt: skip
    est = estimate(cfg)
    assert est.peak_moment == "end of backward"
    # the loss's scalar, which no moment of the estimate holds past the loss, aside
    assert 0 <= est.per_gpu_bytes - trace_step(cfg).peak_bytes + 8 <= 8
