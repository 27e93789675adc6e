"""A for-loop optimizer step (foreach=False: Adam/AdamW, RMSprop, Adagrad) holds the previous
parameter's scratch (Adam's ``denom``) beside the current one's: the estimate's step moment
counts the highest such pair in the module's own parameter order, and equals the trace."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.shape import workload_shape
from profiling.estimate.step_order import loop_peaks
from profiling.models.implementation import project_blocks
from profiling.models.workloads import build_model, find_workload
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import SMALL_VOCAB, llama_spec

# A mixture of experts (our blocks): gate's, up's and down's stacked experts side by side
MOE = {**SMALL_VOCAB, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}

# (model or config, extra settings): each the step's moment
CASES: dict[str, tuple[str | dict[str, Any], dict[str, Any]]] = {
    "tiny-llama, untied head after the final norm, adamw": ("tiny-llama", {}),
    "small vocabulary, adamw fp32": (SMALL_VOCAB, {}),
    "small vocabulary, rmsprop bf16": (SMALL_VOCAB, {"optimizer": "rmsprop",
                                                      "precision": "bf16"}),
    "small vocabulary, adagrad": (SMALL_VOCAB, {"optimizer": "adagrad"}),
    "mixture of experts, adam": (MOE, {"optimizer": "adam"}),
    "LoRA on every linear, adamw": (SMALL_VOCAB, {
        "lora_rank": 8, "lora_targets": ["q", "k", "v", "o", "gate", "up", "down"]}),
    "FSDP 2, adamw": ("tiny-llama", {"fsdp": True, "gpus": 2}),
    "FSDP 2, rmsprop mixed": (SMALL_VOCAB, {"fsdp": True, "gpus": 2, "optimizer": "rmsprop",
                                            "precision": "mixed"}),
}  # fmt: skip


def _model(tmp_path: Path, model: str | dict[str, Any]) -> str:
    return model if isinstance(model, str) else llama_spec(tmp_path, model)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_for_loop_step_is_the_trace_s(tmp_path: Path, case: str) -> None:
    model, extra = CASES[case]
    if extra.get("lora_rank"):
        pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    settings = {"seq": 16, "batch": 2, "precision": "fp32", "optimizer": "adamw", **extra}
    cfg = TrainingConfig(model=_model(tmp_path, model), foreach=False, **settings)
    with project_blocks():
        traced = trace_step(cfg)
        est = estimate(cfg)
    step = next(m for m in est.moments if m.name == "optimizer step")
    assert step.bytes == traced.phase_peaks["optimizer_step"]


# Catalogue models, each built at 2 layers by the module the trace runs (transformers' class,
# or our blocks): BERT/RoBERTa/ViT, T5, BLOOM exist only as transformers'
MODELS = (
    "tiny-llama", "tiny-gpt2", "hf:llama-3.2-1b", "hf:qwen2.5-0.5b", "hf:qwen3-0.6b",
    "hf:gemma-2-2b", "hf:olmo-2-7b", "hf:phi-3-mini", "hf:mixtral-8x7b", "hf:pythia-1b",
    "hf:falcon-7b", "hf:phi-2", "hf:bloom-560m", "hf:flan-t5-small", "hf:t5-small",
    "hf:bert-base-uncased", "hf:roberta-base", "hf:vit-base-patch16-224",
)  # fmt: skip
ONLY_TRANSFORMERS = ("bloom", "t5", "bert", "roberta", "vit")


@pytest.mark.parametrize("ours", [True, False], ids=["our blocks", "transformers"])
@pytest.mark.parametrize("name", MODELS)
def test_the_step_s_order_is_the_built_module_s(name: str, ours: bool) -> None:
    if ours and any(k in name for k in ONLY_TRANSFORMERS):
        pytest.skip("transformers' module only")
    if not ours:
        if not name.startswith("hf:"):
            pytest.skip("our blocks only")
        pytest.importorskip("transformers", reason="the hf extra is not installed")
    from profiling.models.hf_module import build_hf

    found = find_workload(name)
    assert found is not None
    w = found.model_copy(update={"layers": 2, "decoder_layers": 2})
    with torch.device("meta"), project_blocks() if ours else contextlib.nullcontext():
        if name.startswith("hf:"):
            model, _ = build_hf(w, TrainingConfig(model=name))
        else:
            model = build_model(w)
        shape = workload_shape(w)
    built = [p.numel() for p in model.parameters()]
    assert shape["loop_step"] == loop_peaks(built)
