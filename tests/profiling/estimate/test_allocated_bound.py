"""The closed form's allocated counter (``estimate --counter``'s "allocated", what
``max_memory_allocated()`` shows) is at or above the trace's allocations replayed through the
caching allocator's model — the replay an H200 matched within 0.06-0.08 % on
benchmarks/gpu_check.py's workloads (benchmarks/results/gpu-nvidia-h200-2026-11-30.md), where
the closed form was 0.14-0.34 % under the measurement: it counted half a 512-byte block per
tensor and not the large pool's unsplit rests (a block whose rest after a request is at most
1 MiB stays whole, and the allocated counter counts it all)."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate

pytest.importorskip("torch")

MiB = 2**20


def _allocated(fields: dict[str, object]) -> tuple[int, int, int]:
    """(the replay's allocated peak, the closed form's, the trace's tensors at their peak)."""
    from profiling.trace.step import trace_step

    cfg = TrainingConfig(optimizer="adamw", target="cuda", counter="reserved", **fields)
    traced = trace_step(cfg, block_scaling=False)
    closed = estimate(cfg).counters
    assert traced.counters is not None and traced.counters.source == "trace"
    assert closed is not None and closed.source == "closed form"
    return traced.counters.allocated.bytes, closed.allocated.bytes, traced.peak_bytes


@pytest.mark.parametrize(
    "fields",
    [
        # benchmarks/gpu_check.py's GPT-2 rows (the H200 measured 1.0014, 1.0027 and 1.0034 of
        # the old closed form); the rests there: 17.7, 22.0 and 16.9 MB
        {"model": "gpt2-small", "precision": "amp-bf16", "batch": 8, "seq": 1024},
        {"model": "gpt2-small", "precision": "fp32", "batch": 4, "seq": 1024},
        {"model": "gpt2-small", "precision": "amp-bf16", "batch": 4, "seq": 1024,
         "attention": "eager"},
        # full checkpointing: 128 blocks of 1-10 MiB carved out of cached ones, 47.8 MB of rests
        {"model": "hf:qwen2.5-0.5b", "precision": "bf16", "batch": 1, "seq": 1024,
         "checkpointing": "full"},
        {"model": "tiny-llama", "batch": 2, "seq": 128},
    ],
    ids=["gpt2-small-amp-bf16", "gpt2-small-fp32", "gpt2-small-eager", "qwen-0.5b-ckpt", "tiny"],
)  # fmt: skip
def test_the_closed_forms_allocated_is_at_or_above_the_replay(fields: dict[str, object]) -> None:
    replayed, closed, tensors = _allocated(fields)
    assert replayed > tensors  # the workspaces, the rounding and the rests
    assert closed >= replayed
    # above by little: the rests counted per tensor alive (40 KiB each) stay under 0.6 % of a
    # GPT-2 step, and a tiny step is its workspaces
    assert closed <= max(1.006 * replayed, replayed + 8 * MiB)


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "gpt2-small", "precision": "amp-bf16", "batch": 8, "seq": 1024},
        {"model": "tiny-llama", "batch": 2, "seq": 128},
    ],
    ids=["gpt2-small-amp-bf16", "tiny"],
)
def test_expandable_segments_keep_no_unsplit_rests(fields: dict[str, object]) -> None:
    """With expandable segments the allocator splits any rest of 512 B or more off a block in
    either pool (``should_split``), so the allocated counter is the tensors in 512-byte blocks
    and the workspaces: the replay holds no rests (17.7 MB fewer than the default allocator's on
    gpt2-small) and the closed form counts none — above the replay by its rounding allowance
    alone (half a block per tensor), not by 40 KiB a tensor."""
    from profiling.estimate.counters import tensors_alive
    from profiling.trace.step import trace_step

    default, expandable = (
        TrainingConfig(
            optimizer="adamw", target="cuda", counter="reserved", expandable_segments=exp, **fields
        )
        for exp in (False, True)
    )
    replayed = trace_step(expandable, block_scaling=False).counters
    assert replayed is not None
    closed = estimate(expandable)
    assert closed.counters is not None
    tensors = tensors_alive(expandable, closed.shape)
    assert replayed.allocated.bytes <= closed.counters.allocated.bytes
    assert closed.counters.allocated.bytes <= replayed.allocated.bytes + tensors * 512
    if fields["model"] == "gpt2-small":  # the default allocator's rests: 17.7 MB there
        rests = trace_step(default, block_scaling=False).counters
        assert rests is not None
        assert rests.allocated.bytes - replayed.allocated.bytes > 16 * MiB
