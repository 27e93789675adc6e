"""A pipeline's stages in their backward, each rank to the byte of its trace: the output
projection's ``mm`` backward (the logits' gradient, the weight's and the input's gradients
made, the loss's log-probabilities freed) leads the loss's own moment where a microbatch is
short beside a wide hidden size — an fp32 PP 2 plan of 128 tokens a microbatch read 131,076 B
below its trace there; the loss each microbatch leaves (4 B) stays with the schedule until the
step is over (``_internal_losses``; torchtitan's ``losses``); ``loss_parallel``'s rows and the
loss's gradient; the embedding's backward without an upcast; an earlier block's backward
beside the gradients of the blocks after it."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from tests.profiling.plans.short_plan import SHORT

IDS = ["1f1b", "interleaved", "zbv", "long-fp32", "long-bf16", "long-fsdp", "tp2", "long-tp2",
       "long-tp2-bf16", "tp2-unpipelined", "full", "first-block"]  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        {},  # the last rank 131,076 B below before
        {"pp_schedule": "interleaved"},  # -131,076 B
        {"pp_schedule": "zbv"},  # rank 0 (stages 0 and 3) -8 B at the step
        {"batch": 8},  # the loss's moment leads: -4 B (the first microbatch's loss)
        {"batch": 8, "precision": "bf16"},  # -4 B
        {"batch": 8, "precision": "mixed", "dp_shard": 2},  # -4 B
        {"tp": 2},  # rank 0 1.069 (the embedding's gradient counted twice in fp32)
        {"batch": 8, "tp": 2},  # loss_parallel's backward holds the loss's gradient: -4 B
        {"batch": 8, "tp": 2, "precision": "bf16"},  # its forward's rows: -4,088 B (a move)
        {"pp": 1, "microbatches": 1, "tp": 2, "dp_shard": 2, "precision": "mixed", "batch": 8},
        {"checkpointing": "full"},  # the last stage's blocks' backward: -8 B (a move)
        {"layers": 8, "vocab": 1024},  # the last stage's first block leads its backward
    ],
    ids=IDS,
)
def test_each_rank_is_its_trace(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHORT, **plan})
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == t.peak_bytes, (t.pp_rank, e.peak_bytes - t.peak_bytes)
    if cfg.fsdp or cfg.pp_schedule == "zbv":
        return  # (FSDP's own moments: fsdp_moments; ZBV's split backward: zbv_form)
    # every stage's forward and backward at their highest and what they leave, to the byte:
    # the output's backward, the loss, the embedding's backward (its gradient made, no upcast
    # without mixed precision: 4,063,232 B over on the first stage before) and an earlier
    # block's, one block's gradients made (the interleaved plan's 2-block stage: -588,784 B)
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        for name in ("F0", "F", "B0", "B"):
            assert e.moves[name].peak["total"] == t.moves[name].peak["total"], (t.stage, name)
            assert e.moves[name].delta["total"] == t.moves[name].delta["total"], (t.stage, name)
