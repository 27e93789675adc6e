"""A compiled block whose weights are Float8 inside FSDP2's and tensor parallelism's DTensor
(torchtitan's 405B configuration: compile, Float8 with FSDP's fp8 all-gather, TP, async TP,
full checkpointing, a pipeline): traced per rank. Its backward graph returns each weight's
gradient flattened as the gradient is (a plain DTensor: its local tensor and its mesh), not as
the weight is (the Float8 wrapper's tensor and scale, then the mesh); read at the weight's
places, a mesh was taken for a gradient and torch's PipelineStage said only "Failed to run
stage backward"."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config

SMALL = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1408, "vocab": 4096,
         "arch": "llama", "precision": "mixed", "seq": 512, "batch": 4, "compile": True,
         "dp_shard": 2, "tp": 2, "float8": "tensorwise", "float8_all_gather": True}  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [{"pp": 2, "microbatches": 2, "async_tp": True, "checkpointing": "full"}],
    ids=["pp2-async-tp-full"],
)
def test_a_compiled_float8_block_under_fsdp_and_tp_traces_per_rank(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SMALL, **plan)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert len(traced.ranks) == 2
    assert traced.stages[0].moves["B0"].peak["total"] > 0  # the stage's backward ran
    # the closed form within 5 % of the trace and not below it on either rank (1.038 and
    # 36 B under, torchao's fp32 scales, here: its compiled blocks under Float8 and TP are
    # counted as eager ones, an upper bound)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert t.peak_bytes * 0.999 <= e.peak_bytes <= 1.05 * t.peak_bytes, t.pp_rank
