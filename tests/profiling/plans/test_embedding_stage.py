"""A pipeline stage holding the embedding alone (torchtitan counts the embedding as a layer, so
two layers over four stages leave the first stage no block): the closed form
(``profiling.plans.embedding_stage``) held to torch's PipelineStage traced on the fake group.
It modelled a block's transients there: 2x the trace's first forward peak and 33x its first
backward's (16.8 and 34.6 MB against 8.4 and 1.0 MB on the plain plan below), the first rank's
peak 1.0099x the trace's."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan
from profiling.plans.layout import layout_of

# the sequence (8,192 tokens), the width (512) and the vocabulary (1,024) all differ, so a
# formula mixing them up fails
SHAPE = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1024, "vocab": 1024,
         "arch": "llama", "precision": "mixed", "seq": 8192, "pp": 2, "batch": 4,
         "microbatches": 4, "dp_shard": 1, "pp_schedule": "interleaved",
         "virtual_stages": 2}  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        {},  # the lookup's output alone; the embedding's gradient
        {"dp_shard": 2},  # FSDP2: the embedding gathered twice; its gradient's fp32 copy
        {"tp": 2, "dp_shard": 2},  # the vocabulary-sharded lookup's whole-sequence output
        {"precision": "fp32", "dp_shard": 2},  # no fp32 copy: the gradient made is the one
    ],
    ids=["plain", "fsdp", "tp-fsdp", "fsdp-fp32"],
)
def test_an_embedding_only_stage_is_the_trace(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, **plan})
    assert [s.layers for s in layout_of(cfg, 2).stages] == [0, 1, 1, 0]
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    first_t, first_e = traced.stages[0], estimated.stages[0]
    for key in ("F0", "F", "B0", "B"):
        assert first_e.moves[key].peak["total"] == pytest.approx(
            first_t.moves[key].peak["total"], rel=0.001
        ), key
        assert first_e.moves[key].delta["total"] == first_t.moves[key].delta["total"], key
    if not plan:  # and so each rank's peak (1.0099x the trace's on the first rank before);
        # under TP a block's forward, and under FSDP the middle stage's, are not this test's
        for t, e in zip(traced.ranks, estimated.ranks, strict=True):
            assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
