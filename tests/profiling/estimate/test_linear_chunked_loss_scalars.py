"""torchtune's LinearCrossEntropyLoss (``--loss linear-chunked``, the loss of its Llama 3.2 1B
full fine-tuning recipe) holds a few fp32 scalars the estimate's tape left out: the running
total, each chunk's ``nll_loss`` output and total weight (saved until that chunk's backward),
the loss, and in backward the loss's and the total's gradients. Its loss forward read 40 B and
its loss backward 36 B below the trace (``--from 1B_full_single_device.yaml``: the peak
22,148,520,576 B against the trace's 22,148,520,612 B); now equal."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("torch")


@pytest.mark.parametrize(("precision", "batch", "chunks"), [("fp32", 1, None), ("bf16", 2, 3)])
def test_the_linear_chunked_loss_counts_its_scalars(
    precision: str, batch: int, chunks: int | None
) -> None:
    cfg = TrainingConfig(model="tiny-llama", seq=64, batch=batch, precision=precision,
                         optimizer="sgd", loss="linear-chunked", loss_chunks=chunks)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert moments["loss forward"] == traced.phase_peaks["forward"]
    assert moments["loss backward"] == traced.phase_peaks["backward"]
    assert est.per_gpu_bytes == traced.peak_bytes
