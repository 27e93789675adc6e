"""A pipeline stage traced at a few blocks and scaled to its own count (``profiling.plans.
trace``) holds what the stage traced whole holds, where the moment that leads changes past the
samples: the lowest block's backward, beside every gradient made above it, grows with the
blocks where a block's fp32 gradients outweigh what it saves, and overtakes the output's
backward only at 4 blocks on this stage (the fit read it 456,144 B low before)."""

from __future__ import annotations

import pytest

from profiling.config import parse_config

# 8 blocks over PP 2: 4 a stage, beyond the samples of 1-3 blocks
WIDE = {"layers": 8, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 4096,
        "arch": "llama", "precision": "fp32", "seq": 128, "batch": 2, "microbatches": 2,
        "pp": 2, "checkpointing": "none"}  # fmt: skip


def test_a_stage_scaled_past_its_samples_is_the_stage_traced_whole(monkeypatch) -> None:
    pytest.importorskip("torch")
    import profiling.plans.trace as trace

    cfg = parse_config(**WIDE)
    scaled = trace.trace_plan(cfg)
    monkeypatch.setattr(trace, "SAMPLES", ((2, 3, 4),))  # 4 blocks: each stage traced whole
    whole = trace.trace_plan(cfg)
    assert any("by exact affine scaling" in n for n in scaled.notes)
    for s, w in zip(scaled.stages, whole.stages, strict=True):
        assert w.layers == 4
        for name, move in w.moves.items():
            assert s.moves[name].peak["total"] == move.peak["total"], (w.stage, name)
    assert [r.peak_bytes for r in scaled.ranks] == [r.peak_bytes for r in whole.ranks]
