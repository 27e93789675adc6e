"""torchtitan's fsdp_reshard_after_forward = "always" under a pipeline (``--reshard-always
--pp N``): every group resharded after each microbatch's forward and kept gathered from a
backward to the stage's next forward (torch's PipelineStage), traced with FSDP2's own hooks and
in closed form (``profiling.plans.always_pp``); refused before."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.report import rank_counters
from tests.profiling.plans.first_rank import SHAPE

pytest.importorskip("torch")

PLANS = [
    {"pp": 2},
    {"pp": 2, "checkpointing": "full"},
    {"pp": 2, "tp": 2},
    {"pp": 2, "pp_schedule": "interleaved", "virtual_stages": 2},
]


def _both(**over: object):
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "dp_shard": 2, "microbatches": 4, **over})
    return trace_plan(cfg), estimate_plan(cfg)


@pytest.mark.parametrize("plan", PLANS, ids=["1f1b", "full-ckpt", "tp2", "interleaved"])
def test_always_under_a_pipeline_agrees_with_the_trace_per_rank(plan) -> None:
    traced, closed = _both(reshard_always=True, **plan)
    for t, e in zip(traced.ranks, closed.ranks, strict=True):
        # at or above the trace but bytes (the last stage's backwards each free 4 B the trace
        # keeps, as under the default policy); a backward after a forward bounded at its first
        # block from above
        assert t.peak_bytes - 24 <= e.peak_bytes <= t.peak_bytes * 1.04, t.pp_rank


def test_always_frees_the_embedding_between_1f1bs_forward_and_backward() -> None:
    # 1F1B's first rank peaks in a backward after a forward: every block gathered again, the
    # embedding's group not yet (the default keeps it all step); interleaved's first rank peaks
    # higher instead, in a forward holding a group twice (its all-gather result beside it)
    always, _ = _both(reshard_always=True, pp=2)
    default, _ = _both(pp=2)
    embedding = 8192 * 1024 * 2
    assert default.ranks[0].peak_bytes - always.ranks[0].peak_bytes == embedding


def test_a_forward_after_a_backward_starts_gathered() -> None:
    # the probe's third microbatch: its forward after a backward lets every group go, its
    # backward after that forward gathers them again
    traced, closed = _both(reshard_always=True, pp=2)
    for t, e in zip(traced.stages, closed.stages, strict=True):
        gathered = t.moves["B0"].delta["parameters"]
        assert gathered > 0 and t.moves["F0"].delta["parameters"] == 0
        assert t.moves["Fg"].delta["parameters"] == -gathered == -t.moves["Bs"].delta["parameters"]
        for move in ("F0", "F", "Fg", "B0", "B"):
            assert e.moves[move].peak["total"] == t.moves[move].peak["total"], (t.stage, move)


def test_the_composed_peak_is_torchs_whole_schedule() -> None:
    # torch's Schedule1F1B run whole (two steps, every allocation replayed) reaches the peak
    # composed from the probed actions, each picked by what its stage ran before
    from profiling.plans.trace import trace_plan

    res = trace_plan(parse_config(**{**SHAPE, "dp_shard": 2, "microbatches": 4, "pp": 2,
                                     "reshard_always": True, "counter": "reserved",
                                     "expandable_segments": True}))  # fmt: skip
    ws = 2 * 32 * 2**20  # cuBLAS's two workspaces
    for rank in res.ranks:
        allocated = rank_counters(res, rank).allocated.bytes
        assert rank.peak_bytes + ws <= allocated < 1.03 * (rank.peak_bytes + ws), rank.pp_rank


def test_each_forward_and_each_backward_after_a_forward_gathers() -> None:
    # 1F1B: the warm-up forwards gather, then each backward after a forward (the forward after
    # a backward finds the groups gathered): m + 1 per step where the default gathers once
    from tests.profiling.plans.test_reshard_always import _sent

    base = {"model": "llama-7b", "precision": "mixed", "batch": 8, "dp_shard": 4, "pp": 2,
            "microbatches": 8}  # fmt: skip
    gather = "FSDP all-gather of the parameters"
    kept = _sent(parse_config(**base))[gather]
    always = _sent(parse_config(**base, reshard_always=True))[gather]
    assert always == pytest.approx(9 * kept, rel=1e-6)
