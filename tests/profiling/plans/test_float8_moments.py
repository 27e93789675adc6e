"""Float8 inside a 1F1B pipeline's blocks (``profiling.plans.float8_moments``): every action of
every stage, and every rank, at or above its trace and within a few bytes of it — where the
closed form stood below the trace: a wrapped block's forward at ``w2``'s casts (245,768 B per
forward under full checkpointing), the recomputation's casts (a later backward 57,344 B),
``w1``'s backward casts (the last stage's first backward 1,237,008 B; 745,456 B with every 2nd
block wrapped), torchao's Float8 TP styles' forward at ``w2`` (45,124 B; the rank 64 B) and
torch's styles' rowwise scales (1,536 B); and ``w1``'s backward casts under torch's TP styles
(rowwise PP 2 × TP 2 × FSDP 2: stage 0's later backward 167,552 B, rank 0 at 0.9952), beside
``w2``'s all-gathered output gradient (65,536 B) and in a wrapped block's forward (188,416 B);
and under torchao's Float8 TP styles (tensorwise PP 2 × TP 2 × FSDP 2) ``w1``'s backward casts
(stage 0's later backward 122,876 B, rank 0 at 0.9979), a wrapped block's forward (110,600 B)
and ``w2``'s input cast (360,448 B under FSDP's fp8 all-gather)."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan

# hidden 256, FFN 704, 128 tokens a microbatch: the FFN's weights' casts (9 B an element)
# outweigh a block's saved tensors
WIDE = {"layers": 8, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 4096,
        "arch": "llama", "precision": "mixed", "seq": 128}  # fmt: skip


def _each_action_and_rank(pp: int, above: int, only: tuple[str, ...] = (), **plan: Any) -> None:
    pytest.importorskip("torchao")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**WIDE, pp=pp, batch=2 * pp, microbatches=2 * pp, **plan)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for ts, es in zip(traced.stages, estimated.stages, strict=True):
        for name, move in ts.moves.items():
            if only and name not in only:
                continue
            t, e = move.peak["total"], es.moves[name].peak["total"]
            assert t <= e <= t + above, (ts.stage, name, e - t)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert t.peak_bytes <= e.peak_bytes <= t.peak_bytes + above, (
            t.pp_rank, e.peak_bytes - t.peak_bytes, t.peak_at, e.peak_at,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("pp", "plan"),
    [
        (2, {"float8": "tensorwise"}),
        (2, {"float8": "rowwise"}),
        (4, {"float8": "rowwise"}),
        # the weight gradient's matmul in bf16: a rowwise scale counted that is let go (1,020 B)
        (2, {"float8": "rowwise_with_gw_hp"}),
        # every 2nd block wrapped, the last stage's first not: its w1's casts after the later
        # blocks' gradients (745,456 B below the trace before)
        (2, {"float8": "tensorwise", "checkpoint_every": 2}),
    ],
    ids=["tensorwise", "rowwise", "rowwise-pp4", "rowwise-gw-hp", "every-2"],
)
def test_full_checkpointing_each_action_is_its_trace(pp: int, plan: dict[str, Any]) -> None:
    _each_action_and_rank(pp, 1024, checkpointing="full", **plan)


def test_tensor_parallel_each_action_is_its_trace() -> None:
    # tensorwise runs torchao's Float8 TP styles: the Linears' inputs come in fp8, kept with
    # their scales, w2's bf16 input still held by its module call as its weight is cast
    _each_action_and_rank(2, 0, tp=2, float8="tensorwise")


def test_tensor_parallel_rowwise_each_action_is_its_trace() -> None:
    # torch's styles: each input cast in the Linear, a scale a row; w2's output gradient comes
    # all-gathered in bf16 and stays beside its casts (the first stage's later backward 65,536 B
    # below its trace before)
    _each_action_and_rank(2, 0, tp=2, float8="rowwise")


@pytest.mark.parametrize(
    ("pp", "plan"),
    [
        (2, {"tp": 2, "dp_shard": 2, "float8": "rowwise"}),
        (4, {"tp": 2, "dp_shard": 2, "float8": "rowwise"}),
        # w2's gradient still the 16-bit .grad at w1's casts in the first backward (FSDP2's
        # post_backward upcasts it): the last stage's first backward 190,496 B over before
        (2, {"dp_shard": 2, "float8": "tensorwise", "checkpointing": "full"}),
        # a wrapped block's forward at w2's casts beside the norm's sharded output, its
        # all-gathered copy and the residual (stage 0's later forward 188,416 B below before)
        (2, {"tp": 2, "dp_shard": 2, "float8": "rowwise", "checkpointing": "full"}),
    ],
    ids=["tp2-fsdp2", "pp4-tp2-fsdp2", "tensorwise-fsdp2", "tp2-full"],
)
def test_w1s_backward_casts_under_fsdp_and_torchs_tp_styles(pp: int, plan: dict[str, Any]) -> None:
    # torch's TP styles (rowwise) cast in each Linear as without TP, on the rank's FFN width:
    # a later backward peaks at w1's weight cast beside w2's and w3's fresh gradients (kept
    # as .grad until FSDP2's post_backward), w3's input gradient and silu's (rowwise PP 2 ×
    # TP 2 × FSDP 2: stage 0 167,552 B below, rank 0 0.9952; PP 4: ranks 1-2 0.988-0.992)
    _each_action_and_rank(pp, 0, only=("F", "B0", "B"), **plan)


@pytest.mark.parametrize("pp", [2, 4], ids=["pp2", "pp4"])
def test_w1s_backward_casts_under_torchaos_float8_tp_styles(pp: int) -> None:
    # tensorwise beside TP (torchao's Float8 TP styles): w1's weight cast beside w2's and
    # w3's fresh gradients, w3's input gradient and w1's output gradient in fp8 (cast by
    # Float8ColwiseParallel, its bf16 one freed) — PP 2 × TP 2 × FSDP 2: stage 0's later
    # backward 122,876 B below its trace before, rank 0 0.9979
    _each_action_and_rank(pp, 0, only=("F", "B0", "B"), tp=2, dp_shard=2, float8="tensorwise")


@pytest.mark.parametrize(
    "plan",
    [
        # a wrapped block's forward at w2's weight cast beside the norm's fp8 gathered output
        # and the SwiGLU product in bf16 and fp8 (110,600 B below the trace before)
        {"checkpointing": "full"},
        # Float8RowwiseParallel's cast of w2's input (8 B an element) above the weight's, none
        # under FSDP's fp8 all-gather (360,448 B below the trace before)
        {"float8_all_gather": True},
    ],
    ids=["full", "fp8-all-gather"],
)
def test_a_forward_under_torchaos_float8_tp_styles_is_its_trace(plan: dict[str, Any]) -> None:
    pytest.importorskip("torchao")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**WIDE, pp=2, batch=4, microbatches=4, tp=2, dp_shard=2,
                       float8="tensorwise", **plan)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for ts, es in zip(traced.stages, estimated.stages, strict=True):
        assert es.moves["F"].peak["total"] == ts.moves["F"].peak["total"], ts.stage


def test_fsdp_s_fp8_all_gather_keeps_each_converted_weight_s_scale() -> None:
    """Under FSDP's fp8 all-gather each converted weight's unsharded parameter is a
    ``Float8TrainingTensor`` whose fp32 scale FSDP does not free on reshard (torchao's
    ``fsdp_post_all_gather`` hands it ``(data,)`` alone): 4 B a Linear all step, which the
    closed form left out — 112 B below the trace on each stage of 4 blocks, 56 B of 2
    (float8_form.gathered_scales)."""
    pytest.importorskip("torchao")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**WIDE, "layers": 4}, pp=2, batch=4, microbatches=4, tp=2,
                       dp_shard=2, float8="tensorwise", float8_all_gather=True)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for ts, es in zip(traced.stages, estimated.stages, strict=True):
        assert es.base["parameters"] == ts.base["parameters"], ts.stage
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == t.peak_bytes, (t.pp_rank, e.peak_bytes - t.peak_bytes)
