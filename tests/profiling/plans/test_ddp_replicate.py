"""A plan's DDP alone (``--dp-replicate N`` without ``--dp-shard``): torchtitan's ``apply_ddp``
is ``replicate(model, bucket_cap_mb=100)``, a real DistributedDataParallel
(torch/distributed/_composable/replicate.py), whose Reducer holds a copy of every gradient in
the parameters' dtype from the wrap on (``profiling.trace.ddp``). Neither the plan's closed
form nor its trace counted them (a note said "not yet"); both do now, equal per category."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan

SHAPE = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 2048,
         "arch": "llama", "seq": 128, "batch": 2}  # fmt: skip


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_ddp_alone_holds_its_buckets_as_traced(precision: str) -> None:
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, precision=precision, dp_replicate=2)
    traced, est = trace_plan(cfg), estimate_plan(cfg)
    weights = est.stages[0].base["parameters"]  # every parameter, in its own dtype
    assert weights == (4 if precision == "fp32" else 2) * 2_229_504
    for t, e in zip(traced.ranks, est.ranks, strict=True):
        assert e.by_category["buckets"] == t.by_category["buckets"] == weights
        assert t.after_step["buckets"] == weights  # alive through the whole step
        assert e.by_category == t.by_category
        assert e.peak_bytes == t.peak_bytes
    assert not any("not yet: DDP" in n for n in est.notes)


def test_fsdp_and_hsdp_hold_no_buckets() -> None:
    # FSDP2 reduce-scatters into its sharded gradients: no Reducer (HSDP's replicas all-reduce
    # those in place)
    for plan in ({"dp_shard": 2}, {"dp_shard": 2, "dp_replicate": 2}, {"tp": 2, "pp": 2}):
        est = estimate_plan(parse_config(**SHAPE, precision="bf16", **plan))
        assert all(r.by_category["buckets"] == 0 for r in est.ranks), plan
