"""transformers' GPT-2 with the optimizer stepped in backward (``--optimizer-in-bwd``) and every
block keeping what it saved: where a block's MLP matrix (h·f) is larger than the LM head (V·h),
the last block's ``mlp.c_proj`` going back and its weight stepped holds the peak
(``gpt2_end.c_proj_stepped``). The estimate counted the largest tensor stepped beside the
activations as if it were an untied head stepped first: untied wide toy (V 256, h 256, f 1024)
8-bit Adam at 64 × 2 tokens read −392,192 B (0.981) in fp32, −194,560 B amp-bf16, −195,072 B
bf16. Now equal to the byte; where the for-loop's scratch makes the earlier moment higher
(AdamW) it stays a bound above."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import gpt2_end
from profiling.estimate.memory import estimate
from tests.profiling.estimate.test_gpt2_end import SMALL

pytest.importorskip("transformers", reason="the hf extra is not installed")

WIDE = {**SMALL, "vocab_size": 256, "n_embd": 256, "n_inner": 1024}
UNTIED = {**WIDE, "tie_word_embeddings": False}
IN_BWD: dict[str, object] = {"optimizer_in_bwd": True, "optimizer": "adam8bit"}
EQUAL = {
    # name: (config, fields); the old estimate − trace in the comment
    "untied wide fp32": (UNTIED, IN_BWD),  # −392,192 B, 0.981
    "untied wide amp-bf16": (UNTIED, {**IN_BWD, "precision": "amp-bf16"}),  # −194,560 B
    "untied wide bf16": (UNTIED, {**IN_BWD, "precision": "bf16"}),  # −195,072 B
    "untied wide sgd": (UNTIED, {**IN_BWD, "optimizer": "sgd"}),
    "tied wide fp32": (WIDE, IN_BWD),
    "untied small fp32": ({**SMALL, "tie_word_embeddings": False}, IN_BWD),
    # resid_dropout's gradient beside the residual's while c_proj goes back (−131,072 B)
    "untied wide dropout": (UNTIED, {**IN_BWD, "dropout": 0.1}),
    "untied wide amp dropout": (UNTIED, {**IN_BWD, "precision": "amp-bf16", "dropout": 0.1}),
}


def _config(tmp_path: Path, model: dict[str, object], fields: dict[str, object]) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    values: dict[str, object] = {"model": f"hf:{path}", "seq": 64, "batch": 2, **fields}
    return TrainingConfig.parse(style="field", **values)


def _both(cfg: TrainingConfig) -> tuple[Any, Any]:
    """The estimate and the trace of one step."""
    from profiling.trace.step import trace_step

    return estimate(cfg), trace_step(cfg)


@pytest.mark.parametrize("case", list(EQUAL))
def test_c_proj_stepped_in_backward_equals_the_trace(case: str, tmp_path: Path) -> None:
    est, traced = _both(_config(tmp_path, *EQUAL[case]))
    assert (est.peak_moment, est.per_gpu_bytes - traced.peak_bytes) == (gpt2_end.BACKWARD, 0)


def test_adamw_scratch_stays_above(tmp_path: Path) -> None:
    """AdamW's for-loop scratch (two h·f tensors) beside the largest stepped: the earlier moment
    leads, 1.004 of the trace; the c_proj moment beneath it is not above the trace."""
    est, traced = _both(_config(tmp_path, UNTIED, {**IN_BWD, "optimizer": "adamw"}))
    assert 0 <= est.per_gpu_bytes - traced.peak_bytes <= 0.005 * traced.peak_bytes
    ours = next(m.bytes for m in est.moments if m.name == gpt2_end.BACKWARD)
    assert ours <= traced.peak_bytes
