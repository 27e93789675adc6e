"""``trace`` and ``estimate`` of one plan print one nvidia-smi figure where their peaks agree
(audit D10): without a replay (no ``--counter reserved|nvml``) both bound the reserve in closed
form over the rank's peak, and the loss's logits' segments come on top of the reserve of the
step outside the loss (``profiling.estimate.reserve``). The trace's moments are torch's, not
named, so its outside-the-loss peak is its peak less what the loss's transients add above the
rest in closed form (``profiling.plans.outside_loss``); it counted three whole fp32 logits on top
of its peak instead (torchtitan's Llama 3 8B at 9dec370, FSDP 8: 64.99 GB against 58.45 GB)."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig

pytest.importorskip("torch")

# Llama-shaped, small enough to trace a plan in seconds; a vocabulary whose logits matter
SHAPE = {"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 32768,
         "arch": "llama", "precision": "mixed", "seq": 1024, "batch": 2, "dp_shard": 2,
         "expandable_segments": True}  # fmt: skip


@pytest.mark.parametrize("root", [False, True], ids=["fsdp2", "titan-root-group"])
def test_trace_and_estimate_print_one_nvidia_smi_figure(root: bool) -> None:
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.report import rank_counters
    from profiling.plans.trace import trace_plan

    cfg = TrainingConfig.parse(style="field", titan_root_group=root, **SHAPE)
    traced, est = trace_plan(cfg), estimate_plan(cfg)
    assert traced.highest.peak_bytes == est.highest.peak_bytes
    got, want = rank_counters(traced, traced.highest), rank_counters(est, est.highest)
    assert got.reserved.bytes == want.reserved.bytes
    assert got.nvml.bytes == want.nvml.bytes
