"""torchtune's DPO step (--dpo): the estimate equals the trace of the same step on fake tensors.

The trace runs the recipes' own order (profiling.trace.preference: lora_dpo_*.py's reference
through the policy with its adapters off, its fp32 logits held to the next step;
full_dpo_distributed.py's frozen copy, log-probabilities half by half); the estimate writes it as
a loss tape (profiling.estimate.preference). Before, DPO configs were refused (50c0bb5), and read
as a fine-tune they lost the reference and the doubled batch (8B_full_dpo.yaml: 71.75 GB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import LLAMA, WIDE, llama_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

LORA = {"lora_rank": 8}
BOUND = "the reference's forward, a block (bound)"
CASES: list[dict[str, Any]] = [
    {"precision": "bf16"},
    {"precision": "bf16", **LORA},
    {"precision": "fp32"},
    {"precision": "fp32", **LORA},
    {"precision": "mixed"},
    {"precision": "bf16", "target": "cuda"},
    {"precision": "bf16", "target": "cuda", **LORA},
    {"precision": "bf16", "checkpointing": "full"},
    {"precision": "bf16", "checkpointing": "full", **LORA},
    {"precision": "bf16", "qlora": True, **LORA},
    {"precision": "bf16", "grads_kept": True, **LORA},
]


def _config(tmp_path: Path, shape: dict[str, Any], **kw: Any) -> TrainingConfig:
    base = {"seq": 32, "batch": 2, "target": "cpu", "dpo": True}
    return TrainingConfig(model=llama_spec(tmp_path, shape), **{**base, **kw})


@pytest.mark.parametrize("kw", CASES, ids=[json.dumps(c) for c in CASES])
def test_dpo_estimate_equals_its_trace(tmp_path: Path, kw: dict[str, Any]) -> None:
    cfg = _config(tmp_path, LLAMA, **kw)
    traced, est = trace_step(cfg), estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    if est.peak_moment == BOUND:  # fp32 full training: the block's bound leads (1.032)
        assert traced.peak_bytes <= est.per_gpu_bytes <= 1.04 * traced.peak_bytes
        del moments[BOUND]
        assert max(moments.values()) == traced.peak_bytes
    else:
        assert est.per_gpu_bytes == traced.peak_bytes
    # every phase's peak too, not only the step's
    assert moments["loss forward"] == traced.phase_peaks["forward"]
    assert moments["optimizer step"] == traced.phase_peaks["optimizer_step"]


@pytest.mark.parametrize("kw", [{}, LORA], ids=["full", "lora"])
def test_our_blocks_too(tmp_path: Path, kw: dict[str, Any]) -> None:
    with project_blocks():
        cfg = _config(tmp_path, LLAMA, precision="bf16", **kw)
        assert estimate(cfg).per_gpu_bytes == trace_step(cfg).peak_bytes


def test_the_reference_and_the_doubled_rows_are_counted(tmp_path: Path) -> None:
    """Full DPO holds a second copy of the weights; LoRA holds the reference's fp32 logits
    through the step; both far above the same rows fine-tuned."""
    full = estimate(_config(tmp_path, LLAMA, precision="bf16"))
    sft = estimate(_config(tmp_path, LLAMA, precision="bf16", dpo=False))
    assert full.category_bytes("parameters") == 2 * sft.category_bytes("parameters")
    lora = estimate(_config(tmp_path, LLAMA, precision="bf16", **LORA))
    held = [c for c in lora.components if c.name.startswith("Logits: The reference's fp32")]
    assert [c.bytes for c in held] == [32 * 2 * 512 * 4]
    assert full.per_gpu_bytes > 1.15 * sft.per_gpu_bytes


def test_a_block_of_the_reference_is_a_bound_where_the_blocks_lead(tmp_path: Path) -> None:
    """h 256, f 1024, V 256 on 16 × 2 tokens: the reference's no_grad forward through a block
    outweighs its head (0.981 of the trace without its moment); the bound holds it, safe."""
    cfg = _config(tmp_path, WIDE, precision="bf16", seq=16, **LORA)
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == BOUND
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.06 * traced.peak_bytes


@pytest.mark.parametrize(
    ("kw", "said"),
    [({"fsdp": True, "gpus": 2}, "one GPU only"), ({"batch": 3}, "odd"),
     ({"loss": "chunked"}, "loss"), ({"compile": True}, "compile")],
)  # fmt: skip
def test_what_dpo_is_not_modelled_with_is_one_sentence(kw: dict[str, Any], said: str) -> None:
    base = {"model": "hf:llama-3.2-1b", "seq": 32, "batch": 2, "dpo": True}
    with pytest.raises(ConfigError) as info:
        TrainingConfig(**{**base, **kw})
    assert said in str(info.value) and "dpo is not modelled with" in str(info.value)
