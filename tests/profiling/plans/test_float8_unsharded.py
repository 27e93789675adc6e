"""Float8 on a plan without FSDP and without a pipeline (context parallelism alone): a block's
``w2``, ``w3`` and ``w1`` backward casts (torchao's weight cast, 9 B an element) beside every
gradient made so far (#32). The closed form's block moments there were the ring's (no cast)
and Float8's ``w2`` casts without the head's and the later blocks' gradients: on a toy whose
FFN weights outweigh its tokens (h 128, f 512, V 128, 2 blocks, untied; CP 2, 64 tokens a
rank) the trace's peak, at block 0's ``w1`` weight cast, was 82,984 B above the estimate
(0.9908); fully checkpointed in bf16 at seq 128, at ``w2``'s input cast, 65,540 B (0.9878)."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan
from profiling.plans.trace import trace_plan

# an untied Llama whose FFN outweighs its tokens, by shape flags
TOY = {"layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 128,
       "arch": "llama"}  # fmt: skip


@pytest.mark.parametrize(
    ("precision", "seq", "checkpointing"),
    [("mixed", 64, "none"), ("bf16", 128, "full"), ("mixed", 64, "full")],
)
def test_float8_casts_beside_the_gradients_made(
    precision: str, seq: int, checkpointing: str
) -> None:
    cfg = parse_config(**TOY, cp=2, seq=seq, batch=2, precision=precision,
                       float8="tensorwise", checkpointing=checkpointing)  # fmt: skip
    est, traced = estimate_plan(cfg), trace_plan(cfg)
    for e, t in zip(est.ranks, traced.ranks, strict=True):
        # equal to the byte on this toy; never below
        assert e.peak_bytes - t.peak_bytes == 0, (e.peak_bytes, t.peak_bytes)
        assert e.peak_at == t.peak_at == "backward of microbatch 0, stage 0"
