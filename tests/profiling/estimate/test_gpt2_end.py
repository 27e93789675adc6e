"""transformers' GPT-2 module under full training with a small vocabulary (V 128 beside h 128,
f 512): the last block's MLP going back holds the step's peak (``estimate.gpt2_end``). The
estimate's peak was the loss's backward, 0.94 of the trace at 64 × 2 tokens (−721,408 B in
fp32, amp-bf16 and amp-fp16 alike); now equal to the byte, and the neighbours stay at or above
the trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate

pytest.importorskip("torch")

SMALL = {
    "model_type": "gpt2", "vocab_size": 128, "n_embd": 128, "n_inner": 512, "n_layer": 2,
    "n_head": 4, "n_positions": 512,
}  # fmt: skip
BASE = {**SMALL, "vocab_size": 512, "n_embd": 64, "n_inner": 160}

CASES = {
    # (config, fields, estimate − trace at most): equal where the moment is exact
    "fp32": (SMALL, {}, 0),
    "amp-bf16": (SMALL, {"precision": "amp-bf16"}, 0),
    "amp-fp16": (SMALL, {"precision": "amp-fp16"}, 0),
    "bf16": (SMALL, {"precision": "bf16"}, 0),
    "mixed": (SMALL, {"precision": "mixed"}, 0),
    "dropout": (SMALL, {"dropout": 0.1}, 0),
    "grads-kept": (SMALL, {"grads_kept": True}, 0),
    "amp-grads-kept": (SMALL, {"precision": "amp-bf16", "grads_kept": True, "seq": 128}, 0),
    "cpu": (SMALL, {"target": "cpu"}, 0),
    "base": (BASE, {}, 0),  # the loss's backward still the peak
    "seq16": (SMALL, {"seq": 16}, 0),  # the optimizer step
}


@pytest.mark.parametrize("case", list(CASES))
def test_gpt2_last_mlp_backward_is_the_trace(case: str, tmp_path: Path) -> None:
    from profiling.trace.step import trace_step

    config, fields, above = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    cfg = TrainingConfig.parse(
        style="field", model=f"hf:{path}", **{"seq": 64, "batch": 2, **fields}
    )
    est, traced = estimate(cfg), trace_step(cfg)
    assert 0 <= est.per_gpu_bytes - traced.peak_bytes <= above, (
        est.peak_moment,
        est.per_gpu_bytes - traced.peak_bytes,
    )
