"""torch.compile of a block around context parallelism's ring attention, closed form against
trace (``profiling.plans.compiled_form.ring_kept`` / ``ring_backward``): the trace runs the
partitioner's graphs of torchtitan's block with torch's ring inside (one graph, as torchtitan's
``fullgraph=True`` compile), the closed form counts what they save and hold."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config

pytest.importorskip("torch")

SMALL = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1408, "vocab": 4096,
         "arch": "llama", "precision": "mixed", "seq": 512, "batch": 4,
         "compile": True}  # fmt: skip
NARROW = {**SMALL, "vocab": 256}  # a block's backward is the step's highest moment
CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "temporaries", "buffers")


def _both(**over: Any) -> tuple[Any, Any]:
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**over)
    return trace_plan(cfg), estimate_plan(cfg)


@pytest.mark.parametrize(
    "plan",
    [{"cp": 2, "dp_shard": 2}, {"cp": 2, "dp_shard": 2, "precision": "fp32"},
     {"cp": 4, "dp_shard": 1, "fsdp": True}],
    ids=["fsdp2-cp2", "fsdp2-cp2-fp32", "fsdp-over-cp4"],
)  # fmt: skip
def test_a_compiled_ring_block_keeps_what_the_partitioner_saves(plan: dict[str, Any]) -> None:
    # The forward saves views of the ring's all-gathered keys and values (their whole buffer)
    # and the keys' and values' contiguous copies besides what a compiled block keeps without
    # the ring; the eager count the closed form used kept SiLU's output and the norms' rstd
    # instead: 3.4 MB a block under the trace here (0.95 of its peak at cp 2).
    traced, estimated = _both(**{**SMALL, **plan})
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        kept_t, kept_e = t.moves["F0"].delta["activations"], e.moves["F0"].delta["activations"]
        assert kept_e == pytest.approx(kept_t, rel=0.001), (kept_e, kept_t)
    assert estimated.highest.peak_bytes >= traced.highest.peak_bytes * 0.999
    assert estimated.highest.peak_bytes <= traced.highest.peak_bytes * 1.01


def test_at_the_loss_every_category_is_the_traces() -> None:
    traced, estimated = _both(**SMALL, cp=2, dp_shard=2)
    t, e = traced.highest, estimated.highest
    for category in CATEGORIES:
        assert e.by_category[category] == pytest.approx(t.by_category[category], rel=0.01), category


@pytest.mark.parametrize("precision", ["mixed", "fp32"])
def test_a_compiled_ring_blocks_backward_is_its_graphs_highest_moment(precision: str) -> None:
    # The backward graph reads the kept gathered keys and values and runs functionalized: each
    # update of the fp32 key/value gradients the all-to-all brought is a fresh copy. Eager's
    # ring moment (a second all-gather, the gradients updated in place) was 0.99 of the trace
    # in fp32; the closed form holds the graph's buffers at the second scatter.
    traced, estimated = _both(**{**NARROW, "cp": 2, "precision": precision})
    t, e = traced.highest, estimated.highest
    assert t.peak_at.startswith("backward")
    assert t.peak_bytes <= e.peak_bytes <= t.peak_bytes * 1.011
    # in 16 bits the graph's buffers meet 1.5 key-halves lower than the closed form holds them
    # (temporaries 1.07 of the trace's, the peak 1.010); in fp32 to the byte but 8 B
    for category in CATEGORIES:
        rel = 0.08 if category == "temporaries" and precision == "mixed" else 0.01
        assert e.by_category[category] == pytest.approx(t.by_category[category], rel=rel), category


@pytest.mark.parametrize(
    "plan", [{"dp_shard": 2}, {"vocab": 256}], ids=["fsdp2-loss-peak", "block-peak"]
)
def test_the_per_op_policy_around_the_ring_is_not_under_the_trace(plan: dict[str, Any]) -> None:
    # torchtitan's per-op policy compiled around the ring: the partitioner saves the ring's
    # gathered keys and values too (a collective is not recomputed); eager's policy count
    # alone was 0.907 of the trace's peak on the first toy. Not derived: a bound above it.
    traced, estimated = _both(**{**SMALL, **plan, "cp": 2, "checkpointing": "selective-op"})
    ratio = estimated.highest.peak_bytes / traced.highest.peak_bytes
    assert 1.0 <= ratio <= 1.06, ratio
