"""LoRA under `mixed`: peft's fp32 adapters train without master weights, so the optimizer
steps them all at once (foreach, one Ψ_trained·4 B list), not one tensor at a time as full
training's master-weight optimizer does (profiling/trace/build.py builds it for full training
only). The step's moment read 294,912 B below the trace's on the wide toy (all-linear: under
checkpointing the step held the peak, 0.993 of the trace)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import wide_lora

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")


@pytest.mark.parametrize("ours", [True, False])
@pytest.mark.parametrize(("targets", "checkpointing"), [("all-linear", "full"), ("q,v", "none")])
def test_mixed_lora_steps_its_fp32_adapters_with_foreach(
    tmp_path: Path, ours: bool, targets: str, checkpointing: str
) -> None:
    cfg = wide_lora(tmp_path, "mixed", targets, checkpointing=checkpointing)
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    step = next(m.bytes for m in est.moments if m.name == "optimizer step")
    # transformers' module keeps its RoPE buffers (inv_freq twice: 256 B) besides
    assert (
        traced.phase_peaks["optimizer_step"] - 256 <= step <= traced.phase_peaks["optimizer_step"]
    )
    if checkpointing == "full":  # the step is the peak there
        assert est.per_gpu_bytes >= traced.peak_bytes - 256
