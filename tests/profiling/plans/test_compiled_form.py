"""A compiled plan's closed form (``profiling.plans.compiled_form``) against its trace, where
each block's forward and backward are the graphs Inductor's partitioner made on fake tensors:
what each block keeps, per category, and the backward graph's highest moment."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config

pytest.importorskip("torch")

# Llama-shaped, mixed precision, 2,048 tokens a rank: the loss's logits (vocabulary 4,096) make
# the forward's end the highest moment, where every block's saved tensors are alive
SMALL = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1408, "vocab": 4096,
         "arch": "llama", "precision": "mixed", "seq": 512, "batch": 4,
         "compile": True}  # fmt: skip
# ... and with a vocabulary of 256 a block's backward is the highest moment
NARROW = {**SMALL, "vocab": 256}
STATES = ("parameters", "optimizer", "buffers")


def _both(shape: dict[str, Any], plan: dict[str, Any]) -> tuple[Any, Any]:
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**shape, **plan})
    return trace_plan(cfg), estimate_plan(cfg)


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2},
        {"tp": 2, "dp_shard": 2, "checkpointing": "selective-op"},
        {"dp_shard": 2, "float8": "tensorwise"},
        {"dp_shard": 2, "precision": "fp32"},
    ],
    ids=["fsdp", "fsdp-tp-sac", "fsdp-float8", "fsdp-fp32"],
)
def test_each_compiled_block_keeps_what_the_partitioner_saves(plan: dict[str, Any]) -> None:
    # The eager closed form kept SiLU's output and both norms' rstd per block besides (and
    # under the per-op policy w2's output, under Float8 the attention's input): 1.08-1.42x
    # the trace's activations here. Every category of the highest moment within 1 % (the
    # token ids aside: the closed form counts the labels too, 16 KB).
    traced, estimated = _both(SMALL, plan)
    t, e = traced.highest, estimated.highest
    for category in ("activations", "parameters", "temporaries", "gradients", *STATES):
        assert e.by_category[category] == pytest.approx(t.by_category[category], rel=0.01), category
    assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
    assert any("what Inductor's partitioner saves" in n for n in estimated.notes)


@pytest.mark.parametrize(
    "plan", [{"tp": 2}, {"tp": 2, "checkpointing": "full"}], ids=["tp", "tp-full"]
)
def test_a_compiled_blocks_backward_is_its_graphs_highest_moment(plan: dict[str, Any]) -> None:
    # The backward graph holds the gradient reaching it, every weight gradient until it
    # returns them, and (checkpointed) the whole forward recomputed: the closed form's
    # moments (SwiGLU's backward, the attention's input gradient) are the trace's, category
    # by category; under full checkpointing one block's gradients are made before the first
    # block's backward. The eager count was 0.97 (full) and 1.07 of the trace's peak.
    traced, estimated = _both(NARROW, plan)
    t, e = traced.highest, estimated.highest
    for category in ("activations", "parameters", "temporaries", "gradients", *STATES):
        assert e.by_category[category] == pytest.approx(t.by_category[category], rel=0.01), category


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2},
        {"dp_shard": 2, "checkpointing": "full"},
        {"pp": 2, "microbatches": 2, "dp_shard": 2},
        {"pp": 2, "microbatches": 4, "tp": 2, "layers": 4, "checkpointing": "full"},
    ],
    ids=["fsdp", "fsdp-full", "pp", "pp-tp-full"],
)
def test_a_compiled_plans_backward_is_not_under_its_trace(plan: dict[str, Any]) -> None:
    # Where a block's backward is the highest moment under FSDP or a pipeline the closed form
    # stays at or above the trace (FSDP's collectives in flight are eager's count): the eager
    # count was 0.90 of the trace on the first pipeline rank with full checkpointing
    traced, estimated = _both(NARROW, plan)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert 1.0 <= e.peak_bytes / t.peak_bytes <= 1.10, (t.pp_rank, e.peak_bytes, t.peak_bytes)


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 2, "checkpointing": "full", "layers": 4},
        {"tp": 2, "checkpointing": "full", "layers": 3, "precision": "fp32"},
        {"tp": 2, "layers": 4},
    ],
    ids=["tp-full-4", "tp-full-3-fp32", "tp-4"],
)
def test_the_lowest_block_goes_back_beside_every_block_above_s_gradients(
    plan: dict[str, Any],
) -> None:
    # Block j from the top goes back beside the j blocks above's gradients, their kept tensors
    # freed. Under full checkpointing a block keeps only its input, so the lowest block is the
    # highest: counting the second block alone read 0.9615 of the trace (TP 2, V 64 h 128 f 512,
    # 3 layers, seq 256 x 2). The gradients alive then equal the trace's; the peak is not below
    # it by more than the loss's scalars.
    traced, estimated = _both(NARROW, plan)
    t, e = traced.highest, estimated.highest
    assert e.by_category["gradients"] == t.by_category["gradients"]
    assert e.peak_bytes >= t.peak_bytes - 64, (e.peak_bytes, t.peak_bytes)


# Llama V 64, h 128, f 512, 512 tokens a rank, bf16: under full checkpointing a block keeps its
# input alone (128 KB), less than its sharded gradients over 2 ranks (240 KB)
TINY = {"layers": 3, "hidden": 128, "heads": 8, "kv_heads": 4, "ffn": 512, "vocab": 64,
        "arch": "llama", "precision": "bf16", "seq": 256, "batch": 2, "compile": True,
        "fsdp": True, "checkpointing": "full"}  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [{"dp_shard": 2}, {"dp_shard": 2, "layers": 4}, {"dp_shard": 2, "precision": "mixed"},
     {"dp_shard": 4}, {"dp_shard": 4, "layers": 4, "precision": "fp32"}],
    ids=["fsdp2", "fsdp2-4", "fsdp2-mixed", "fsdp4", "fsdp4-fp32-4"],
)  # fmt: skip
def test_under_fsdp_a_compiled_block_goes_back_beside_the_blocks_above_s_sharded_gradients(
    plan: dict[str, Any],
) -> None:
    # FSDP2 reduce-scatters each group's gradients when its backward ends: block j from the
    # top goes back beside the head's and the j blocks above's sharded gradients, their inputs
    # freed; none was counted (--dp-shard 2: 0.985, 4 layers 0.974, mixed 0.966; --dp-shard 4
    # +3,896 B, a gathered group more making up for it). Equal now but the loss's scalar.
    traced, estimated = _both(TINY, plan)
    t, e = traced.highest, estimated.highest
    assert t.peak_bytes - 8 <= e.peak_bytes <= t.peak_bytes + 16_384, (e.peak_bytes, t.peak_bytes)
