"""transformers' Llama under autocast, made wide next to its tokens (h 256, f 1024, V 256, 16
tokens): its loss runs inside the model's forward, beside the final RMSNorm's fp32 output and
autocast's cached copies of the first block's q, k, v A weights. The loss-forward moment read
0.9985-0.9987 of the trace there; now it equals the trace but for its scalars
(profiling.estimate.llama_loss_held)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.implementation import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import WIDE, llama_spec, wide_lora

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# the trace's scalars: rotary inv_freq (4·head_dim), SDPA's seed and offset (24 B a block), the
# loss's two fp32 scalars
SCALARS = 4 * WIDE["hidden_size"] // WIDE["num_attention_heads"] + 24 * 2 + 8


@pytest.mark.parametrize(
    ("precision", "targets"),
    [("amp-bf16", "q,v"), ("amp-bf16", "all-linear"), ("amp-fp16", "q,up,lm_head")],
)
def test_the_loss_inside_the_forward_holds_the_peak(
    tmp_path: Path, precision: str, targets: str
) -> None:
    cfg = wide_lora(tmp_path, precision, targets)
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == "loss forward"
    assert traced.peak_bytes - SCALARS <= est.per_gpu_bytes <= traced.peak_bytes


def test_full_training_holds_the_norms_output_too(tmp_path: Path) -> None:
    """Full training under autocast: the optimizer step leads, but the loss's moment in forward
    holds the final RMSNorm's fp32 output as well (16,384 B below the trace's forward before)."""
    cfg = TrainingConfig(model=llama_spec(tmp_path, WIDE), seq=16, batch=1, precision="amp-bf16")
    traced, est = trace_step(cfg), estimate(cfg)
    loss = next(m.bytes for m in est.moments if m.name == "loss forward")
    assert traced.phase_peaks["forward"] - SCALARS <= loss <= traced.phase_peaks["forward"]


@pytest.mark.parametrize(
    ("precision", "targets"), [("amp-bf16", "all-linear"), ("amp-fp16", "q,v")]
)
def test_our_blocks_loss_holds_the_cached_copies(
    tmp_path: Path, precision: str, targets: str
) -> None:
    """Our blocks' loss runs after their forward returns but inside autocast: the first
    block's cached q, k, v A copies are alive beside it (all-linear: 12,288 B below the trace's
    peak before, 0.99971)."""
    cfg = wide_lora(tmp_path, precision, targets)
    with project_blocks():
        traced, est = trace_step(cfg), estimate(cfg)
    loss = next(m.bytes for m in est.moments if m.name == "loss forward")
    assert loss == traced.phase_peaks["forward"]
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes


@pytest.mark.parametrize(
    ("precision", "extra"),
    [("amp-bf16", {}), ("amp-fp16", {}), ("amp-bf16", {"lora_rank": 8, "lora_targets": "q,v"})],
)
def test_full_checkpointing_holds_the_norms_output_too(
    tmp_path: Path, precision: str, extra: dict
) -> None:
    """Full checkpointing: the final norm runs outside every checkpoint, so the loss's forward
    holds its fp32 output as without — the step's peak at 64 × 2, −32,768 B (s·b·h·4, 0.987)
    below the trace before (audit6 D66: the Trainer's bf16 + gradient_checkpointing)."""
    cfg = TrainingConfig(model=llama_spec(tmp_path), seq=64, batch=2, precision=precision,
                         checkpointing="full", **extra)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    loss = next(m.bytes for m in est.moments if m.name == "loss forward")
    assert loss == traced.phase_peaks["forward"]
    assert traced.peak_bytes <= est.per_gpu_bytes
