"""A layer-scaled model's reserve is its every block's allocations replayed.

The caching allocator's reserve is not affine in the block count: a later block's requests are
carved by best fit out of the cached blocks its predecessors left, in segments that never merge
(c10/cuda/CUDACachingAllocator.cpp), which a sample of 1-3 blocks does not reach. The rule
before (the allocated peak × the samples' largest reserved ÷ allocated) read 0.943 (default
segments) and 0.912 (expandable) of replaying all 24 of Qwen2.5-0.5B's layers, and 1.370 on
Llama 3.1 8B under ZeRO-3 × 64 (57.58 GB against 42.02 GB). Nor does the samples' reserved −
allocated bound or extrapolate the whole model's: 0.38, 0.93, 0.88 GB at 1, 2, 3 layers against
1.97 GB at 24 here; 2.10, 1.84, 1.58 GB against 5.67 GB on Llama 3.2 1B (bf16, full
checkpointing, 4,096 tokens); 5.69, 5.88, 5.61 GB against 5.15 GB on the 8B ZeRO-3 step."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig

# Qwen2.5-0.5B, bf16, full checkpointing, 1 × 1024: every one of its 24 layers replayed
# (trace_step(cfg, block_scaling=False)), default and expandable segments
QWEN = {"model": "hf:qwen2.5-0.5b", "batch": 1, "seq": 1024, "precision": "bf16",
        "checkpointing": "full", "counter": "reserved"}  # fmt: skip
WHOLE_RESERVED = {False: 7_029_653_504, True: 6_266_290_176}


@pytest.mark.parametrize("expandable", [False, True], ids=["default", "expandable"])
def test_a_layer_scaled_models_reserve_is_its_whole_replay(expandable: bool) -> None:
    pytest.importorskip("transformers")
    from profiling.trace.step import trace_step

    cfg = TrainingConfig.parse(style="field", expandable_segments=expandable, **QWEN)
    result = trace_step(cfg)
    assert result.counters is not None
    # the samples' largest reserved ÷ allocated read 6,626,887,257 B (default segments)
    assert result.counters.reserved.bytes == WHOLE_RESERVED[expandable]
    assert any("every one of the 24 blocks traced" in n for n in result.notes), result.notes
    # the allocated peak is still the one the samples extrapolate exactly
    allocated_only = trace_step(cfg.model_copy(update={"counter": "allocated"}))
    assert any(n.startswith("layer-scaled: ") for n in allocated_only.notes)
    assert result.peak_bytes == allocated_only.peak_bytes
