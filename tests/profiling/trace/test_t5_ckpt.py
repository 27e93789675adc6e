"""LoRA on encoder-decoders (Flan-T5, mT5) with full checkpointing: every block of both stacks
recomputed in backward, estimated in closed form (profiling/estimate/t5_ckpt.py) against the
trace of peft's adapters on transformers' own module — per category, and at the peak, which is
a recomputed decoder block's MLP or cross-attention, or an encoder block's, by the lengths."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from tests.profiling.trace.tiny_t5 import LORA, categories_are_the_trace, lora_run, t5_config

ATTENTION = ["q", "k", "v", "o"]


def _cfg(tmp_path: Path, kind: str, **options: object) -> TrainingConfig:
    return t5_config(tmp_path, kind, **{**LORA, "checkpointing": "full", **options})


RUNS = [  # kind, precision, targets, lora_dropout, (seq, target, batch)
    ("flan-t5", "mixed", ["q", "v"], 0.0, (32, 24, 2)),  # a decoder block's MLP going back
    ("flan-t5", "fp32", ["q", "v"], 0.0, (32, 24, 2)),  # the first decoder block's
    ("flan-t5", "bf16", ["q", "v"], 0.0, (128, 96, 8)),
    ("mt5, q 72 wide", "mixed", ATTENTION, 0.0, (16, 40, 2)),
    ("mt5, q 72 wide", "fp32", ["q", "v"], 0.1, (128, 96, 8)),
    # a target much shorter than the input (PEFT's rows): an encoder block leads; the decoder's
    # cross-attention over the encoder's tokens is modelled beside it
    ("flan-t5", "mixed", ["q", "v"], 0.1, (128, 4, 8)),
    ("flan-t5", "fp32", ["q", "v"], 0.1, (128, 4, 8)),
    ("flan-t5", "mixed", ["q", "v"], 0.0, (128, 24, 8)),
    # deeper stacks: the blocks in between (a gradient more each in the decoder)
    ("flan-t5, 4 + 5 blocks", "mixed", ["q", "v"], 0.1, (64, 48, 4)),
    ("flan-t5, 4 + 5 blocks", "fp32", ATTENTION, 0.0, (32, 24, 2)),
    # T5 v1.0's ReLU MLP: its norm going back leads where d_ff is small (2.5·d_model here)
    ("t5 v1.0", "mixed", ["q", "v"], 0.0, (32, 24, 2)),
    ("t5 v1.0", "mixed", ["q", "v"], 0.05, (128, 96, 8)),
    ("t5 v1.0", "mixed", ["q", "v"], 0.0, (128, 4, 8)),  # the encoder's MLP leads
    ("t5 v1.0", "bf16", ["q", "v"], 0.1, (128, 4, 8)),
    ("t5 v1.0, 4 + 5 blocks", "mixed", ATTENTION, 0.0, (64, 48, 4)),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "precision", "targets", "dropout", "lengths"), RUNS)
def test_lora_with_checkpointing_is_the_trace(
    tmp_path: Path, kind: str, precision: str, targets: list, dropout: float, lengths: tuple
) -> None:
    """What the step keeps after forward (every block's input, the biases the first blocks
    hand on, the final norms, the log-probabilities) equals the trace in every category; the
    peak — a block recomputed and going back beside the checkpoints below it, the adapters'
    gradients above it and the gradients reaching it — is not below the trace and within
    1 % of it (equal on each of these)."""
    cfg = lora_run(tmp_path, kind, precision, targets, dropout, lengths, checkpointing="full")
    traced, est = categories_are_the_trace(cfg)
    assert traced.peak_phase == "backward"
    assert est.peak_moment.startswith("backward, a recomputed")
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.01 * traced.peak_bytes


AUTOCAST = [  # kind, precision, targets, lora_dropout, (seq, target, batch), what leads
    # the gated MLP going back in fp32 (was 0.979-0.99 of the trace: refused)
    ("flan-t5", "amp-bf16", ["q", "v"], 0.0, (128, 96, 8), "a recomputed decoder block"),
    ("flan-t5", "amp-bf16", ["q", "v"], 0.1, (128, 4, 8), "a recomputed encoder block"),
    ("mt5, q 72 wide", "amp-fp16", ATTENTION, 0.0, (16, 40, 2), "a recomputed decoder block"),
    # the first decoder block's recomputation end: wo's input copy and the fp32 product alive
    ("flan-t5, 4 + 5 blocks", "amp-bf16", ATTENTION, 0.0, (32, 24, 2),
     "a recomputed decoder block"),
    # ReLU: the recomputation's end (T5's fp32 cast of ReLU's output, wo's input copy)
    ("t5 v1.0", "amp-bf16", ["q", "v"], 0.0, (128, 4, 8), "a recomputed encoder block"),
    # the loss: the decoder's fp32 output, the tied head's scaled copy, the decoder's ids
    ("t5 v1.0, 4 + 5 blocks", "amp-bf16", ATTENTION, 0.0, (64, 48, 4), "loss forward"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "precision", "targets", "dropout", "lengths", "lead"), AUTOCAST)
def test_lora_with_checkpointing_under_autocast_is_the_trace(
    tmp_path: Path, kind: str, precision: str, targets: list, dropout: float, lengths: tuple,
    lead: str,
) -> None:  # fmt: skip
    """Under autocast every category and the peak equal the trace: each recomputed block's
    16-bit copies of its frozen weights and adapters, the gated MLP's fp32 gradients, the
    recomputation's end, the tensors the forward holds while the loss runs."""
    cfg = lora_run(tmp_path, kind, precision, targets, dropout, lengths, checkpointing="full")
    traced, est = categories_are_the_trace(cfg)
    assert est.peak_moment.endswith(lead)
    assert est.per_gpu_bytes == traced.peak_bytes


MLP = [  # kind, precision, targets, lora_dropout, (seq, target, batch)
    # the first decoder block's recomputation at up's adapter: B's output, its scaled copy and
    # their sum beside the frozen output (was refused: 0.992 of the trace)
    ("flan-t5", "mixed", ["q", "v", "up", "down"], 0.0, (32, 24, 2)),
    ("flan-t5", "mixed", [*ATTENTION, "gate", "up", "down"], 0.0, (128, 96, 8)),  # 0.988
    ("flan-t5, 4 + 5 blocks", "mixed", ["q", "v", "up"], 0.05, (64, 48, 4)),  # 0.964
    # ReLU: up's gradient cast to fp32 frees its 16-bit one; the norm going back once the MLP's
    # copies and masks are freed (bf16 with dropout: was 1.030)
    ("t5 v1.0", "mixed", ["q", "v", "up"], 0.0, (32, 24, 2)),
    ("t5 v1.0", "mixed", ["q", "v", "up", "down"], 0.1, (128, 96, 8)),  # 0.941
    ("t5 v1.0", "bf16", ["q", "v", "up", "down"], 0.1, (128, 96, 8)),
    # down going back: its scaling's gradient made before the recomputation, A's input
    # gradient, the frozen wo's and their sum (fp32 was 0.988); the first block's bias alive at
    # the recomputation's end
    ("t5 v1.0, 4 + 5 blocks", "fp32", ["q", "v", "down"], 0.0, (32, 24, 2)),
    ("mt5, q 72 wide", "mixed", ["q", "v", "down"], 0.0, (16, 40, 2)),
    ("mt5, q 72 wide", "bf16", [*ATTENTION, "gate", "up", "down"], 0.05, (128, 96, 8)),
    ("flan-t5", "fp32", [*ATTENTION, "gate", "up", "down"], 0.0, (128, 96, 8)),  # 1.042
    ("flan-t5", "mixed", ["q", "v", "up", "down"], 0.0, (128, 4, 8)),  # an encoder block leads
    # autocast (estimate.t5_mlp_amp): each matmul's 16-bit copies made again; the old closed
    # form read 0.913 (T5 v1.0 down with dropout) to 1.035 of the trace
    ("flan-t5", "amp-bf16", ["q", "v", "up", "down"], 0.0, (32, 24, 2)),
    ("t5 v1.0", "amp-bf16", ["q", "v", "down"], 0.1, (128, 4, 8)),
    ("flan-t5", "amp-fp16", ["q", "v", "gate", "up", "down"], 0.1, (128, 96, 8)),
    ("t5 v1.0, 4 + 5 blocks", "amp-bf16", [*ATTENTION, "up", "down"], 0.1, (64, 48, 4)),
    ("flan-t5, 4 + 5 blocks", "amp-bf16", ["q", "v", "gate", "down"], 0.0, (32, 24, 2)),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "precision", "targets", "dropout", "lengths"), MLP)
def test_lora_on_the_mlp_with_checkpointing_is_the_trace(
    tmp_path: Path, kind: str, precision: str, targets: list, dropout: float, lengths: tuple
) -> None:
    """Adapters on up, gate and down under full checkpointing (estimate.t5_mlp_ckpt, under
    autocast t5_mlp_amp): every category and the peak — inside a block's recomputation, its
    MLP going back or its MLP's norm — equal to the trace."""
    cfg = lora_run(tmp_path, kind, precision, targets, dropout, lengths, checkpointing="full")
    traced, est = categories_are_the_trace(cfg)
    assert est.peak_moment.startswith("backward, a recomputed")
    assert est.per_gpu_bytes == traced.peak_bytes


@pytest.mark.parametrize(
    ("kind", "options", "said"),
    [("flan-t5", {"lora_rank": None, "target": "cpu"},
      "full finetune under checkpointing on the CPU target")],
)  # fmt: skip
def test_what_is_not_modelled_under_checkpointing_is_one_sentence(
    tmp_path: Path, kind: str, options: dict, said: str
) -> None:
    """Not a number in the unsafe direction: a full finetune on the CPU target is refused
    (estimate.t5_ckpt_full models it on CUDA)."""
    with pytest.raises(ProfilingError, match=said):
        estimate(_cfg(tmp_path, kind, **options))
