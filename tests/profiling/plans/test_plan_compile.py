"""torch.compile under an FSDP plan (``--compile --dp-shard N``): each block checkpointed, then
compiled, then sharded, as torchtitan does; the block's forward split by Inductor's partitioner
on fake tensors, the checkpoint's policy reaching it as recompute tags."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError, ProfilingError

pytest.importorskip("torch")

SHAPE = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024, "batch": 2, "dp_shard": 2}  # fmt: skip


def _activations(**over: object) -> tuple[int, int]:
    from profiling.plans.trace import trace_plan

    top = trace_plan(parse_config(**{**SHAPE, **over})).highest
    return top.by_category["activations"], top.peak_bytes


@pytest.mark.parametrize("checkpointing", ["none", "selective-op"])
def test_a_compiled_block_keeps_less_than_eager(checkpointing) -> None:
    eager = _activations(checkpointing=checkpointing)
    compiled = _activations(checkpointing=checkpointing, compile=True)
    assert compiled[0] < eager[0] and compiled[1] < eager[1]


def test_the_per_op_policy_reaches_the_partitioner() -> None:
    # the policy's recompute tags make the compiled block keep less than compiled alone
    # (without them, the partitioner would fail on a checkpoint region it cannot number)
    plain = _activations(compile=True)
    policy = _activations(compile=True, checkpointing="selective-op")
    assert policy[0] < plain[0]


def test_what_is_not_modelled_is_one_sentence() -> None:
    for degree in ({"tp": 2}, {"pp": 2, "microbatches": 2}, {"cp": 2}):
        with pytest.raises(ConfigError, match="not yet with --tp, --pp or --cp"):
            parse_config(**SHAPE, compile=True, **degree)
    from profiling.plans.closed_form import estimate_plan

    with pytest.raises(ProfilingError, match="traced, not estimated yet"):
        estimate_plan(parse_config(**SHAPE, compile=True))
