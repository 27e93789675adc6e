"""FSDP2 under a pipeline, stage by stage against torch's own FSDP2 and PipelineStage traced
on fake tensors: no move of the closed form below its trace, and to the byte where FSDP2's
groups decide the moment (``profiling.plans.fsdp_pipelined``) or a for-loop optimizer steps
(``profiling.plans.step_form``). Below before: the first stage's first forward at the last
block's copy-out (161,768 B), the last stage's first backward at its first block's fp32 upcast
(1,046,504 B), a for-loop step beside the previous parameter's scratch (512 B after the final
norm; 32,768-360,448 B after an FFN weight), RMSprop's step counters (80 B on the last rank),
ZBV's reduction of 16-bit gradients counted as fp32 ones (512 B)."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from tests.profiling.plans.short_plan import SHORT

MIXED = {"precision": "mixed", "dp_shard": 2}
INTERLEAVED = {"dp_shard": 2, "batch": 8, "pp_schedule": "interleaved"}


@pytest.mark.parametrize(
    ("plan", "exact"),
    [
        # blocks the largest group: the last block's copy-out leads the first forward
        ({**MIXED, "vocab": 1024}, {(0, "F0"), (1, "B0"), (0, "step"), (1, "step")}),
        ({**MIXED}, {(1, "B0"), (1, "step")}),  # the output's step after the final norm's
        ({**MIXED, "tp": 2, "batch": 8}, {(1, "B0"), (0, "step"), (1, "step")}),
        # the middle stages step an FFN weight beside the one before it
        (INTERLEAVED, {(1, "step"), (2, "step"), (3, "step")}),
        ({"dp_shard": 2, "optimizer": "rmsprop"}, {(0, "step"), (1, "step")}),
        # ZBV's weight backwards leave 16-bit gradients for R to reduce
        ({**MIXED, "vocab": 1024, "pp_schedule": "zbv"}, {(1, "R"), (2, "R")}),
    ],
    ids=["blocks-lead", "mixed", "tp2", "interleaved-fp32", "rmsprop", "zbv"],
)
def test_no_move_is_below_its_trace(plan: dict[str, Any], exact: set[tuple[int, str]]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHORT, **plan})
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes >= t.peak_bytes, (t.pp_rank, e.peak_bytes - t.peak_bytes)
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        assert e.base["total"] == t.base["total"], t.stage  # RMSprop's counters: -80 B
        for name in t.moves:
            est, tr = e.moves[name].peak["total"], t.moves[name].peak["total"]
            assert est >= tr, (t.stage, name, est - tr)
            if (t.stage, name) in exact:
                assert est == tr, (t.stage, name, est - tr)
            assert e.moves[name].delta["total"] == t.moves[name].delta["total"], (t.stage, name)
