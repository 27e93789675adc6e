"""torchtune's chunked cross-entropy (``--loss chunked``): the loop holds the loss's two fp32
scalars through backward, which no line of the estimate counts for this loss (step_scalars'
line is PyTorch's loss's). The loss backward read 8 B below the trace on every chunked row
of the #31 sweep (tiny-llama, tiny-gpt2, gpt2-small; fp32, bf16, amp-bf16; SGD, AdamW;
--grads-kept, full checkpointing); now equal."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("torch")


@pytest.mark.parametrize(("model", "batch"), [("tiny-llama", 1), ("tiny-llama", 2)])
def test_the_chunked_loss_backward_holds_the_loops_scalars(model: str, batch: int) -> None:
    cfg = TrainingConfig(model=model, seq=64, batch=batch, precision="fp32", optimizer="sgd",
                         loss="chunked")  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "backward"
    moments = {m.name: m.bytes for m in est.moments}
    assert moments["loss backward"] == traced.peak_bytes
