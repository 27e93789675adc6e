"""The check both recomputed-block test files make (test_recomputed_eager: eager LoRA and DoRA
with full checkpointing; test_recomputed_4bit: the same on bitsandbytes' 4-bit base): what the
step keeps equals the trace per category, the peak is a recomputed block's backward, and the
estimate bounds the trace's peak from above, not far."""

from __future__ import annotations

import contextlib
from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate import recomputed_eager
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

CATEGORIES = ("parameters", "optimizer", "activations")


def check_recomputed_bound(cfg: TrainingConfig, ours: bool, case: str, most: float) -> None:
    """``most``: how far above the trace's peak the bound may lie (a ratio)."""
    with project_blocks() if ours else contextlib.nullcontext():
        traced = trace_step(cfg)
        est = estimate(cfg)
    seen: dict[str, Any] = traced.phases["after_forward"]
    for category in CATEGORIES:  # what the step keeps: the ids and positions apart (≤ 520 B)
        assert 0 <= seen[category] - est.category_bytes(category) <= 520, (case, category)
    peak = max(est.moments, key=lambda m: m.bytes)
    assert peak.name == recomputed_eager.NAME, (case, peak.name)
    assert traced.peak_bytes <= est.per_gpu_bytes <= most * traced.peak_bytes, (
        case, est.per_gpu_bytes / traced.peak_bytes,
    )  # fmt: skip
