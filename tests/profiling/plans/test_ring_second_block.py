"""D43's fp32 case: context parallelism's ring inside the second block's backward (#32).

Without a pipeline the ring's backward moment was taken at the first and the last block only,
as if it were affine in the block; it is not at the ends: the first block prefetches the
embedding's FSDP group and the last holds the head's reduce-scatter input. In fp32 under full
checkpointing block 1's moment (a whole block's group prefetched, one fewer block's gradient
shards reduced, block 0's input still kept) is above block 0's where a block's group is larger
than the embedding's: on llama-untied-l4 (CP 2 x FSDP 2, seq 256) the trace's peak was
31,088 B above the closed form (0.9872), inside layers.1's attention backward
(aten._scaled_dot_product_efficient_attention_backward)."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan
from profiling.plans.trace import trace_plan

# /tmp/audit3/cfg/llama-untied-l4.json's shape, by hand (the same estimate to the byte)
TOY = {"layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 160, "vocab": 512,
       "arch": "llama"}  # fmt: skip


@pytest.mark.parametrize("precision", ["fp32", "mixed"])
def test_the_rings_second_block_is_a_candidate(precision: str) -> None:
    cfg = parse_config(**TOY, dp_shard=2, cp=2, seq=256, precision=precision,
                       checkpointing="full")  # fmt: skip
    est, traced = estimate_plan(cfg), trace_plan(cfg)
    for e, t in zip(est.ranks, traced.ranks, strict=True):
        # at most a few bytes above (16 B in fp32, 24 B mixed, in activations), never below
        assert 0 <= e.peak_bytes - t.peak_bytes <= 32, (e.peak_bytes - t.peak_bytes, precision)
        assert e.peak_at == t.peak_at
