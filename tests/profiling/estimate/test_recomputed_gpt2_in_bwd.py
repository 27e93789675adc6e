"""transformers' GPT-2 under full checkpointing and eager attention with the optimizer stepped in
backward (``--optimizer-in-bwd``): a recomputed block's ``mlp.c_proj`` is stepped beside the
block's recomputed tensors (``estimate.recomputed_gpt2_in_bwd``). The estimate kept its earlier
bound there (the end of forward and one block's kept tensors): 0.921 (fp32) and 0.876
(amp-bf16) of the trace on the V 128 toy with AdamW, 0.862-0.956 untied with SGD and 8-bit
Adam. Beside it: the eager 4-D causal mask every checkpointed block keeps
(``estimate.eager_mask``: −b·s²·r, with or without the optimizer in backward) and an untied
head's 8-bit states (``shape.param_dims``). Now equal to the trace to the byte; where the
earlier bound leads (V 512) it stays a bound above."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import recomputed_gpt2
from profiling.estimate.memory import estimate
from tests.profiling.estimate.test_recomputed_gpt2 import SHAPES, SMALL

pytest.importorskip("transformers", reason="the hf extra is not installed")

UNTIED = {**SMALL, "tie_word_embeddings": False}
WIDE_UNTIED = {**SHAPES["wide"], "tie_word_embeddings": False}
BASE = {**SMALL, "vocab_size": 512, "n_embd": 64, "n_inner": 160}
IN_BWD: dict[str, object] = {"optimizer_in_bwd": True}
# name: (config, fields, the old estimate − trace in the comment)
EQUAL = {
    "fp32 adamw": (SMALL, IN_BWD),  # −686,080 B, 0.921
    "amp-bf16 adamw": (SMALL, {**IN_BWD, "precision": "amp-bf16"}),  # −1,079,296 B, 0.876
    "bf16 adamw": (SMALL, {**IN_BWD, "precision": "bf16"}),  # 0.929
    "amp-fp16 adamw wide": (SHAPES["wide"], {**IN_BWD, "precision": "amp-fp16"}),
    "bf16 sgd l3": ({**SMALL, "n_layer": 3}, {**IN_BWD, "precision": "bf16", "optimizer": "sgd"}),
    "untied fp32 adam8bit": (UNTIED, {**IN_BWD, "optimizer": "adam8bit"}),  # 0.931
    "untied amp-bf16 sgd wide": (
        WIDE_UNTIED, {**IN_BWD, "precision": "amp-bf16", "optimizer": "sgd"}
    ),  # 0.902
    "untied bf16 adam8bit wide": (
        WIDE_UNTIED, {**IN_BWD, "precision": "bf16", "optimizer": "adam8bit"}
    ),  # 0.935
    "fp32 adam8bit, the mask": (SMALL, {"optimizer": "adam8bit"}),  # −32,768 B
    "bf16 adam8bit, the mask": (SMALL, {"precision": "bf16", "optimizer": "adam8bit"}),
}  # fmt: skip


def _config(
    tmp_path: Path, model: Mapping[str, object], fields: Mapping[str, object]
) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    values: dict[str, object] = {
        "model": f"hf:{path}", "seq": 64, "batch": 2, "checkpointing": "full",
        "attention": "eager", "optimizer": "adamw", **fields,
    }  # fmt: skip
    return TrainingConfig.parse(style="field", **values)


@pytest.mark.parametrize("case", list(EQUAL))
def test_gpt2_fully_checkpointed_eager_equals_the_trace(case: str, tmp_path: Path) -> None:
    from profiling.trace.step import trace_step

    cfg = _config(tmp_path, *EQUAL[case])
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.peak_moment == recomputed_gpt2.NAME
    assert est.per_gpu_bytes == traced.peak_bytes, est.per_gpu_bytes - traced.peak_bytes
    assert est.category_bytes("optimizer") == traced.after_step.get("optimizer", 0)


def test_where_the_earlier_bound_leads_it_stays_above(tmp_path: Path) -> None:
    """V 512 beside h 64: the earlier bound (it holds the loss's log-probabilities) leads, a
    bound 1.2 % above; the exact moment beneath it equals the trace."""
    from profiling.trace.step import trace_step

    cfg = _config(tmp_path, BASE, IN_BWD)
    est, traced = estimate(cfg), trace_step(cfg)
    exact = next(m.bytes for m in est.moments if m.name == recomputed_gpt2.NAME)
    assert exact == traced.peak_bytes, exact - traced.peak_bytes
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.02 * traced.peak_bytes


def test_the_mask_only_where_eager_and_fully_checkpointed(tmp_path: Path) -> None:
    """SDPA skips the causal mask; without checkpointing nothing keeps it (under selective each
    layer's checkpointed attention core keeps it as an input: profiling.trace.selective)."""
    name = "Activations: eager attention's 4-D causal mask"
    for fields, counted in (
        ({}, True),
        ({"attention": "sdpa"}, False),
        ({"checkpointing": "selective"}, True),
        ({"checkpointing": "none"}, False),
    ):
        lines = estimate(_config(tmp_path, BASE, fields)).components
        found = [c.bytes for c in lines if c.name.startswith(name)]
        assert found == ([2 * 64 * 64 * 4] if counted else []), fields


LOSS_FORWARD = {
    "amp-bf16 in-bwd full": ({**IN_BWD, "precision": "amp-bf16"}),  # the peak: −25,360 B
    "amp-fp16 none sdpa": ({"precision": "amp-fp16", "checkpointing": "none", "attention": "sdpa"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(LOSS_FORWARD))
def test_the_loss_forward_holds_the_final_norms_fp32_output(case: str, tmp_path: Path) -> None:
    """Under autocast GPT2LMHeadModel holds ln_f's fp32 output to the loss's end
    (``gpt2_end.norm_output_held``): the loss's forward moment equals the trace's forward peak,
    was s·b·h·4 = 32,768 B below it (V 512 beside h 64, 4 blocks)."""
    from profiling.trace.step import trace_step

    cfg = _config(tmp_path, SHAPES["l4"], LOSS_FORWARD[case])
    est, traced = estimate(cfg), trace_step(cfg)
    loss_forward = next(m.bytes for m in est.moments if m.name == "loss forward")
    assert loss_forward == traced.phase_peaks["forward"], (
        loss_forward - traced.phase_peaks["forward"]
    )
    assert est.per_gpu_bytes >= traced.peak_bytes
