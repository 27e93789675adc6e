"""FSDP2 without resharding after forward on a plan (``--zero 2``: ``fully_shard(...,
reshard_after_forward=False)``, torchtitan's ``fsdp_reshard_after_forward = "never"``): the
trace runs torch's FSDP2 on the fake world, the closed form is held to it."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan

SHAPE = {"layers": 3, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 512}  # fmt: skip


@pytest.mark.parametrize(
    ("plan", "same_moment"),
    [
        ({"dp_shard": 2, "batch": 2}, True),
        ({"dp_shard": 2, "batch": 2, "checkpointing": "full"}, True),
        ({"dp_shard": 2, "tp": 2, "batch": 2}, True),
        # the closed form's first block backward, 0.9 % above the trace's loss backward
        ({"dp_shard": 4, "batch": 1, "checkpointing": "selective-op"}, False),
    ],
)
def test_fsdp_kept_gathered_after_forward_is_its_trace(
    plan: dict[str, Any], same_moment: bool
) -> None:
    # every group stays gathered from its forward to its post_backward: the closed form
    # counted ZeRO-3 there (0.864 of the trace on the first plan: an under-estimate)
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, **plan, zero=2)
    assert not cfg.reshard_after_forward
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    resharded = estimate_plan(cfg.model_copy(update={"zero": 3}))
    for t, e, z3 in zip(traced.ranks, estimated.ranks, resharded.ranks, strict=True):
        assert t.peak_bytes * 0.999 <= e.peak_bytes <= t.peak_bytes * 1.01
        assert e.peak_bytes > z3.peak_bytes  # the gathered groups, kept
        for category in ("gradients", "optimizer", "buffers"):
            assert e.by_category[category] == pytest.approx(t.by_category[category], rel=0.01)
        if same_moment:  # the trace files the embedding group's gathered weight as activations
            # (its tracker's label), the closed form as parameters: the two together agree
            both = [r.by_category["parameters"] + r.by_category["activations"] for r in (t, e)]
            assert both[1] == pytest.approx(both[0], rel=0.01)
            temporaries = [r.by_category["temporaries"] for r in (t, e)]
            assert temporaries[1] == pytest.approx(temporaries[0], rel=0.01)
    # its first forward leaves every group gathered (the final norm and output's always are)
    kept = estimated.stages[0].moves["F0"].delta["parameters"]
    assert kept > resharded.stages[0].moves["F0"].delta["parameters"]


def test_a_plan_kept_gathered_says_so() -> None:
    said = estimate_plan(parse_config(**SHAPE, dp_shard=2, zero=2)).notes
    assert any(n.startswith("--zero 2: FSDP2 keeps each group gathered") for n in said)
    plain = estimate_plan(parse_config(**SHAPE, dp_shard=2)).notes
    assert not any(n.startswith("--zero 2") for n in plain)
