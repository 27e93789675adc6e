"""Our GPT-2's ``drop(wte(idx) + wpe(pos))`` keeps its mask for backward (1 B per element on
CUDA), with or without full checkpointing (the blocks' checkpoints start after it). The
estimate counted the blocks' dropout masks but not this one: tiny-gpt2 --dropout 0.1, mixed,
128 × 2 read −16,384 B (0.997), fully checkpointed −16,384 (0.996), bf16 fully checkpointed
−16,384 (0.994) below the trace; now equal to it."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("precision", "checkpointing"), [("mixed", "none"), ("mixed", "full"), ("bf16", "full")]
)
def test_the_embeddings_dropout_mask_is_counted(precision: str, checkpointing: str) -> None:
    cfg = TrainingConfig(model="tiny-gpt2", seq=128, batch=2, precision=precision,
                         dropout=0.1, checkpointing=checkpointing)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes
    assert any(c.name.endswith("dropout mask of the embeddings") for c in est.components)
