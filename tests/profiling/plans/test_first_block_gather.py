"""FSDP2's first block gathering itself as its backward starts (D43): its pre-backward copies
its all-gather's output out into its unsharded parameters, both alive, beside the later
block's reduce-scatter input (fp32 under mixed), the reduced gradients and every tensor the
block saved (torch 2.13 torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
``pre_backward`` → ``wait_for_unshard``, _fsdp_collectives.py ``foreach_all_gather_copy_out``).
The closed form had the moments inside a block's backward, each with the group below
prefetched — the embedding's for the first block, smaller than a block: on a wide toy (h 256,
f 4h, V 256) the trace's peak was 25,440 B above the closed form's at FSDP 4, and the context
plan of D43 (CP 2 × FSDP 2, seq 32) 33,632 B (0.9978)."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan
from profiling.plans.trace import trace_plan

WIDE = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 1024, "vocab": 256,
        "arch": "llama", "precision": "mixed"}  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2, "cp": 2, "seq": 32},  # D43
        {"dp_shard": 4, "seq": 16},
        {"dp_shard": 2, "seq": 64, "checkpointing": "full"},
    ],
)
def test_the_first_blocks_gather_is_counted(plan: dict) -> None:
    cfg = parse_config(**WIDE, **plan)
    est, traced = estimate_plan(cfg), trace_plan(cfg)
    for e, t in zip(est.ranks, traced.ranks, strict=True):
        assert e.peak_bytes == t.peak_bytes, (e.peak_bytes - t.peak_bytes, plan)
        assert e.peak_at == t.peak_at
