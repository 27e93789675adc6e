"""Gradient accumulation on a plan without a pipeline (``--microbatches M`` with --dp-shard,
--tp): M forward and backward passes of batch / M before one optimizer step, FSDP2
reduce-scattering each into the sharded gradients, as torchtitan's train_step runs its
gradient_accumulation_steps — traced (torch's FSDP2 on a fake world) and in closed form
(``profiling.plans.accum``), per category and at the peak."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError

pytest.importorskip("torch")

SHAPE = {"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024, "batch": 4}  # fmt: skip


def _both(**over: object):
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, **over})
    return trace_plan(cfg).ranks[0], estimate_plan(cfg).ranks[0]


@pytest.mark.parametrize(
    "plan",
    [{"dp_shard": 2, "microbatches": 2},
     {"dp_shard": 2, "microbatches": 2, "checkpointing": "full"},
     {"dp_shard": 2, "tp": 2, "microbatches": 4},
     {"dp_shard": 4, "microbatches": 2, "zero": 2}],
    ids=["fsdp", "fsdp-ckpt", "fsdp-tp", "fsdp-never-reshard"],
)  # fmt: skip
def test_accumulated_microbatches_estimate_equals_the_trace(plan) -> None:
    traced, closed = _both(**plan)
    # the later microbatches' backward is the peak: every gradient shard held since the first
    assert "microbatch 1" in traced.peak_at and "microbatch 1" in closed.peak_at
    assert traced.by_category["gradients"] > 0
    assert closed.peak_bytes == pytest.approx(traced.peak_bytes, rel=0.01)
    # --zero 2: torch's tracker files the head group's gathered weights (16.8 MB here) under
    # activations, the closed form under parameters, in one step as well: the total agrees
    cats = ["gradients"] if plan.get("zero") == 2 else list(traced.by_category)
    for cat in cats:
        b = traced.by_category[cat]
        assert closed.by_category[cat] == pytest.approx(b, rel=0.01, abs=2**16), cat


def test_accumulation_holds_the_gradient_shards_one_microbatchs_activations_do_not() -> None:
    # the same local batch in 2 microbatches: half the activations, the shards held through
    # the second (FSDP2 adds each new shard into them; no unsharded gradient outlives a backward)
    whole, _ = _both(dp_shard=2)
    halves, closed = _both(dp_shard=2, microbatches=2)
    assert halves.peak_bytes < whole.peak_bytes
    assert halves.by_category["gradients"] == closed.by_category["gradients"]
    assert halves.by_category["activations"] < 0.55 * whole.by_category["activations"]


def test_where_a_blocks_backward_leads_the_estimate_stays_above_the_trace() -> None:
    # a vocabulary smaller than the blocks' widths: a later backward's highest moment is at a
    # block, which the first backward's bounds (it held the shards made so far)
    traced, closed = _both(dp_shard=2, microbatches=2, vocab=512, checkpointing="full")
    assert traced.peak_bytes <= closed.peak_bytes < 1.1 * traced.peak_bytes


def test_microbatches_must_divide_the_batch_and_need_a_plan() -> None:
    with pytest.raises(ConfigError, match="must divide --batch 4"):
        parse_config(**SHAPE, dp_shard=2, microbatches=3)
    with pytest.raises(ConfigError, match="needs --pp > 1"):
        parse_config(**SHAPE, microbatches=2)  # one GPU: not a plan
    assert (
        "gradient accumulation over 2 microbatches"
        in parse_config(**SHAPE, dp_shard=2, microbatches=2).describe()
    )
