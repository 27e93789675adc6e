"""torchtune's chunked cross-entropy (``--loss chunked``) at its forward's peak, the last
chunk's ``nll_loss``: every chunk's fp32 ``total_weight`` (saved for backward), that chunk's
output, the running total and the int64 count of labelled tokens. The estimate's loss forward
read 48 B (8 chunks) below the trace's forward peak on every row of the #31 toy sweep
(tiny-llama, tiny-gpt2; fp32, bf16, amp-bf16; SGD, AdamW); now equal."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("torch")


@pytest.mark.parametrize(("precision", "chunks"), [("fp32", None), ("bf16", 4), ("amp-bf16", 16)])
def test_the_chunked_loss_forward_holds_its_chunks_scalars(
    precision: str, chunks: int | None
) -> None:
    cfg = TrainingConfig(model="tiny-llama", seq=64, batch=1, precision=precision,
                         optimizer="sgd", loss="chunked", loss_chunks=chunks)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert moments["loss forward"] == traced.phase_peaks["forward"]
