"""QLoRA (bitsandbytes' 4-bit layers) under autocast on GPT-NeoX's kind of decoder with a
vocabulary small next to its blocks: the last block's 4-bit MLP (and BLOOM's attention) hold the
step's peak, its f-wide tensors fp32 because a 4-bit layer hands back its fp32 input's dtype
(profiling.estimate.neox_qlora_amp). The estimate read `before` of the trace (an adapted down,
Phi's and BLOOM's 4-bit MLPs were left to the loss's moments); now it equals the trace but for
the trace's scalars."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import bloom_amp, neox_moments
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import BASE, SMALL, WIDE, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

SHAPES = {"small": SMALL, "base": BASE, "wide": WIDE}

# (kind, LoRA targets, lora_dropout, seq × batch, shape, estimate ÷ trace before)
CASES = [
    # an adapted down: its base's and its adapter's fp32 input gradients and their sum
    ("gpt_neox", "o,v,down", 0.0, (256, 2), "small", 0.775),
    ("gpt_neox", "o,v,down", 0.0, (128, 3), "small", 0.782),  # s·b·h·2 ≠ h·f·2
    ("gpt_neox", "q,v,down", 0.1, (256, 2), "small", 0.783),  # forward: A's dropped input
    ("gpt_neox sequential", "o,v,down", 0.0, (256, 2), "small", 0.823),
    ("falcon-7b", "q,k,v,o,up,down", 0.05, (256, 2), "small", 0.814),
    ("falcon-40b", "q,v,down", 0.0, (256, 2), "small", 0.772),
    ("gpt_neox", "o,v,down", 0.0, (16, 1), "wide", 0.849),  # forward: the sum's tensors
    # Phi's gelu_new: three fp32 f-wide gradients going back
    ("phi", "q,v", 0.0, (256, 2), "small", 0.772),
    ("phi", "q,v,down", 0.0, (256, 2), "small", 0.835),
    ("phi", "q,v", 0.0, (16, 1), "wide", 0.822),
    # BLOOM's bloom_gelu_back: six; its attention: fp32 fused q/k/v output and its copies
    ("bloom", "q,v", 0.0, (256, 2), "small", 0.700),
    ("bloom", "q,k,v,o,up,down", 0.05, (256, 2), "small", 0.765),
    ("bloom", "q,v", 0.0, (512, 2), "base", 0.796),
    ("bloom", "q,v,down", 0.1, (512, 1), "base", 0.834),  # b = 1: no copies of q, k, v
    ("bloom", "o,v", 0.0, (256, 2), "base", 0.916),
    ("bloom", "q,v", 0.0, (16, 1), "wide", 0.798),
    # down's absmax, dequantized before its weight, outweighs its output on few tokens
    ("gpt_neox", "q,v", 0.0, (16, 1), "wide", 0.9967),
    ("falcon-7b", "q,v", 0.0, (16, 1), "wide", 0.9960),
]
MOMENTS = (neox_moments.FORWARD, neox_moments.BACKWARD, bloom_amp.FORWARD)


@pytest.mark.parametrize(("kind", "targets", "dropout", "tokens", "shape", "before"), CASES)
def test_a_4bit_mlp_under_autocast_equals_the_trace(
    tmp_path: Path, kind: str, targets: str, dropout: float, tokens: tuple[int, int],
    shape: str, before: float,
) -> None:  # fmt: skip
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SHAPES[shape]), seq=tokens[0], batch=tokens[1],
        precision="amp-bf16", qlora=True, lora_rank=8, lora_targets=targets,
        lora_dropout=dropout,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in MOMENTS
    # the trace's peak, to its scalars (the loss's, counted: 8 B over here)
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 64


# (LoRA targets, lora_dropout, seq × batch, shape, estimate ÷ trace before, the most above now)
BLOOM_DROPOUT = [
    ("q,v", 0.0, (256, 2), "small", 0.871, 64),  # the peak at GELU's forward
    ("q,v,down", 0.0, (256, 2), "small", 0.876, 64),
    ("q,v", 0.0, (128, 3), "small", 0.971, 64),
    ("q,v", 0.0, (256, 2), "base", 0.811, 64),  # the peak at the attention's dropout_add
    ("q,v,down", 0.0, (256, 2), "base", 0.815, 64),
    ("q,v", 0.0, (512, 1), "base", 0.801, 64),  # one sequence: no copies of q, k, v
    ("o,v,down", 0.1, (256, 2), "small", 0.878, 160_000),  # o's adapter: a bound (1.0055)
]


@pytest.mark.parametrize(("targets", "dropout", "tokens", "shape", "before", "most"), BLOOM_DROPOUT)
def test_bloom_qlora_with_dropout_holds_the_probabilities_dropped_fp32_copies(
    tmp_path: Path, targets: str, dropout: float, tokens: tuple[int, int], shape: str,
    before: float, most: int,
) -> None:  # fmt: skip
    """Under QLoRA the attention probabilities are fp32 (the fused q/k/v output's dtype), so
    their dropped copy is a new fp32 tensor bmm does not save (it saves autocast's 16-bit copy):
    BloomBlock and BloomModel's loop hold two blocks' (profiling.estimate.bloom_amp
    .dropped_probs); the estimate read `before`."""
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, "bloom", SHAPES[shape]), seq=tokens[0], batch=tokens[1],
        precision="amp-bf16", qlora=True, lora_rank=8, lora_targets=targets,
        lora_dropout=dropout, dropout=0.1,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in MOMENTS
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + most
