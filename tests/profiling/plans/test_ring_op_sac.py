"""Context parallelism's ring under torchtitan's per-op checkpointing (``--cp N --checkpointing
selective-op``): the ring's backward moment beside a block's recomputation
(profiling.plans.ring_form.ring_peaks) counts the outputs the policy kept once — they are not
among what the recomputation remakes (a fully checkpointed block's are, beyond its input). The
closed form subtracted them a second time: CP 2 × TP 2 × FSDP 2 (hidden 256, FFN 704, 128
tokens) 152,064 B below the trace (0.9855), on both ring ranks."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.plans.closed_form import estimate_plan

# the FFN wider than the tokens: a block's kept matmul outputs outweigh the ring's buffers
WIDE = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 1024,
        "arch": "llama", "precision": "mixed", "seq": 128}  # fmt: skip


def test_the_rings_backward_beside_the_per_op_recomputation_is_its_trace() -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**WIDE, cp=2, tp=2, dp_shard=2, checkpointing="selective-op")
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert set(traced.ring_ranks) == {0, 1}
    for place, ranks in traced.ring_ranks.items():
        for t, e in zip(ranks, estimated.ring_ranks[place], strict=True):
            # SDPA's seed and offset (24 B) counted in the recomputed block: the policy's cache
            # hands the kernel's outputs back
            assert t.peak_bytes <= e.peak_bytes <= t.peak_bytes + 64, (place, t.peak_at)
            for category in ("activations", "temporaries", "gradients", "parameters"):
                got, want = e.by_category[category], t.by_category[category]
                assert want <= got <= want + 64, (place, category, got - want)
