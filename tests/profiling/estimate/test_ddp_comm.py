"""DDP's all-reduce in the communication count (``--gpus N`` without sharding): torch's Reducer
all-reduces its buckets, which hold the trainable parameters' dtype (``initialize_buckets``,
c10d/reducer.cpp; ``profiling.estimate.ddp.bucket_bytes``). Under autocast the parameters and
so the buckets are fp32: the count took the compute dtype's 2 B per parameter; under mixed
(16-bit parameters and gradients) it took FSDP's fp32 reduce dtype. Time only: the buckets'
memory was counted already."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.comm import comm
from profiling.estimate.memory import estimate
from profiling.estimate.shape import shape_of

NAME = "data parallel all-reduce of the gradients"


@pytest.mark.parametrize(
    ("precision", "per_parameter"), [("fp32", 4), ("amp-bf16", 4), ("amp-fp16", 4), ("mixed", 2),
                                     ("bf16", 2)],
)  # fmt: skip
def test_ddp_all_reduces_its_buckets_dtype(precision: str, per_parameter: int) -> None:
    cfg = TrainingConfig(model="llama-1b", seq=512, batch=2, precision=precision, gpus=4)
    shape = shape_of(cfg)
    sent = {t.name: t for t in comm(cfg, shape).transfers}[NAME]
    assert sent.bytes == int(2 * shape["params"] * per_parameter * 3 / 4)
    assert f"× {per_parameter} B ×" in sent.formula


@pytest.mark.parametrize(
    "flags", [{"ddp_bucket_view": True}, {"ddp_bucket_view": True, "fsdp": True, "gpus": 2}]
)
def test_the_bucket_view_where_no_ddp_runs_is_said_to_change_nothing(flags) -> None:
    # D76: accepted silently before; said, not refused
    with_it = estimate(TrainingConfig.parse(model="tiny-llama", **flags))
    plain = {k: v for k, v in flags.items() if k != "ddp_bucket_view"}
    without = estimate(TrainingConfig.parse(model="tiny-llama", **plain))
    assert with_it.per_gpu_bytes == without.per_gpu_bytes
    assert any(n.startswith("--ddp-bucket-view is for") for n in with_it.notes)
    # under DDP it applies, and no such note
    ddp = estimate(TrainingConfig.parse(model="tiny-llama", gpus=2, ddp_bucket_view=True))
    assert not any(n.endswith("nothing here") for n in ddp.notes)


def test_find_unused_given_where_no_ddp_runs_is_said_to_change_nothing() -> None:
    # D76: given by the user (a flag, a tool's field) it is said; a Trainer file's implied one
    # is listed ignored by the recipe instead (tests/profiling/recipes/test_hf_trainer_ddp.py)
    one = estimate(TrainingConfig.parse(model="tiny-llama", ddp_find_unused=True))
    plain = estimate(TrainingConfig.parse(model="tiny-llama"))
    assert one.per_gpu_bytes == plain.per_gpu_bytes
    assert any(n.startswith("--ddp-find-unused is for") for n in one.notes)
