"""cuBLASLt's workspace (``profiling.estimate.cublaslt``): a linear with a bias keeps 1 MiB per
thread beside cuBLAS's workspaces, allocated through the caching allocator (measured on an H200:
benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json), so the allocated, reserved and
nvidia-smi counters of a model with biased linears count it — once for forward's thread, twice
when checkpointing runs the forward again on the autograd thread — and a Llama's do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.cublaslt import LT_WORKSPACE
from profiling.estimate.memory import estimate

PROBE = Path(__file__).parents[3] / "benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json"
MiB = 2**20


def test_the_workspace_is_the_h200s_measurement() -> None:
    rows = {r["probe"]: r for r in json.loads(PROBE.read_text(encoding="utf-8"))["rows"]}
    # after a plain mm (cuBLAS's 32 MiB), a biased bf16 linear keeps 1 MiB more: on this thread
    # and again on another; its backward (mm and a sum) keeps no more than the autograd
    # thread's cuBLAS workspace
    assert rows["linear bf16 + bias"]["kept_beyond_tensors"] == LT_WORKSPACE
    assert rows["linear bf16 + bias on another thread"]["kept_beyond_tensors"] == LT_WORKSPACE
    assert rows["linear bf16 + bias, backward"]["kept_beyond_tensors"] == 32 * MiB


@pytest.mark.parametrize(
    ("fields", "threads"),
    [
        ({"model": "gpt2-small", "precision": "amp-bf16"}, 1),
        ({"model": "gpt2-small", "precision": "amp-bf16", "checkpointing": "full"}, 2),
        ({"model": "llama-1b", "precision": "bf16"}, 0),
        ({"model": "llama-1b", "precision": "bf16", "checkpointing": "full"}, 0),
    ],
)
def test_each_counter_counts_it_where_a_linear_has_a_bias(
    fields: dict[str, object], threads: int
) -> None:
    cfg = TrainingConfig(counter="nvml", gpu="h200", **fields)
    e = estimate(cfg)
    c = e.counters
    assert c is not None
    # the allocated counter beyond the peak: cuBLAS's two 32 MiB, cuBLASLt's, the rounding
    rounding = c.allocated.bytes - e.per_gpu_bytes - 64 * MiB - threads * LT_WORKSPACE
    assert 0 <= rounding < 512 * MiB
    assert ("cuBLASLt's" in c.allocated.how) == (threads > 0)
    if threads:
        assert f"cuBLASLt's {threads} × 1 MiB (linears with a bias" in c.allocated.how
    assert c.allocated.bytes < c.reserved.bytes < c.nvml.bytes


def test_the_traces_replay_counts_it_too() -> None:
    pytest.importorskip("torch")
    from profiling.trace.step import trace_step

    fields = {"precision": "amp-bf16", "batch": 2, "seq": 64, "counter": "reserved"}
    gpt2 = trace_step(TrainingConfig(model="gpt2-small", **fields), block_scaling=False)
    assert gpt2.counters is not None
    assert "cuBLASLt's 1 × 1 MiB" in gpt2.counters.allocated.how
    # the replay holds it: the tensors, rounded, beside 64 MiB of cuBLAS and 1 MiB of cuBLASLt
    assert gpt2.counters.allocated.bytes >= gpt2.peak_bytes + 64 * MiB + LT_WORKSPACE
