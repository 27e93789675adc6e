"""A compiled block going back with the gradients kept (``--grads-kept``) and a tied head: the
head's V·h gradient waits in autograd's input buffer for the embedding's before it is accumulated
into the kept one (``compiled_backward.waiting``), as with the optimizer in backward. The
compiled block's moment left it out: BLOOM V 512 (h 64) mixed, seq 128, LitGPT's loss, Adafactor
read −30,728 B (0.991; the loss's backward led, 65,536 B under the trace's peak at the last
block). Now equal to the trace to the byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import compiled_backward
from profiling.estimate.memory import estimate

pytest.importorskip("transformers", reason="the hf extra is not installed")

BLOOM = {
    "model_type": "bloom", "vocab_size": 512, "hidden_size": 64, "n_layer": 2, "n_head": 4,
    "num_hidden_layers": 2, "num_attention_heads": 4,
}  # fmt: skip
CASES = {
    "litgpt adafactor": {"loss": "litgpt", "optimizer": "adafactor"},  # −30,728 B, 0.991
    "adamw": {"optimizer": "adamw"},
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_tied_head_gradient_waits_beside_the_kept_ones(case: str, tmp_path: Path) -> None:
    from profiling.trace.step import trace_step

    path = tmp_path / "config.json"
    path.write_text(json.dumps(BLOOM), encoding="utf-8")
    fields: dict[str, object] = {
        "model": f"hf:{path}", "seq": 128, "batch": 1, "precision": "mixed", "compile": True,
        "grads_kept": True, **CASES[case],
    }  # fmt: skip
    cfg = TrainingConfig.parse(style="field", **fields)
    est, traced = estimate(cfg), trace_step(cfg)
    gap = (est.peak_moment, est.per_gpu_bytes - traced.peak_bytes)
    assert gap == (compiled_backward.NAME, 0)
