"""Every block fully checkpointed without FSDP or a pipeline (#32's plan sweep): the lowest
block's backward is the highest moment where a block's gradients outweigh its input.

A checkpointed block keeps only its input, so each block's backward frees one input and makes
a block's gradients; the closed form had the first block's backward only. On
llama-untied-l3's shape, DDP 2 (``--dp-replicate 2``) fp32 seq 128, the trace's peak (inside
block 0's recomputed MLP backward, ``w2``'s done) was 124,168 B above the closed form
(0.9763)."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan
from profiling.plans.trace import trace_plan

# /tmp/audit3/cfg/llama-untied-l3.json's and -l4.json's shape, by hand
TOY = {"hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 160, "vocab": 512,
      "arch": "llama", "seq": 128, "batch": 2, "checkpointing": "full"}  # fmt: skip


@pytest.mark.parametrize(
    ("layers", "precision"),
    [(3, "fp32"), (3, "bf16"), (4, "fp32")],  # 3 fp32: the sweep's row; 4 fp32 −231,176 B
)
def test_the_lowest_checkpointed_blocks_backward_is_counted(layers: int, precision: str) -> None:
    cfg = parse_config(**TOY, layers=layers, precision=precision, dp_replicate=2)
    est, traced = estimate_plan(cfg), trace_plan(cfg)
    for e, t in zip(est.ranks, traced.ranks, strict=True):
        assert e.peak_bytes == t.peak_bytes, (e.peak_bytes - t.peak_bytes, layers, precision)
        assert e.peak_at == t.peak_at
