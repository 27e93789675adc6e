"""LitGPT's full.py on more than one GPU (``--loss litgpt-full`` under FSDP): the whole logits
cast to fp32 by Fabric, the loss in 128-row chunks, and the script's loop holding the logits —
the previous micro-batch's through this one's forward (the root gathered at its start), this
one's through backward (the LM head's and the root's gradients) to the next forward. It was
refused under FSDP ("the gathered head's gradient moments") and --from a LitGPT full config on
several devices fell back to PyTorch's loss; now estimated, and the estimate agrees with the
trace at the step's peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.implementation import transformers_installed
from profiling.trace.step import trace_step

pytestmark = pytest.mark.skipif(not transformers_installed(), reason="transformers' modules")

SLACK = 192  # the loss's scalars (its sum, a count of labels)


def _model(tmp_path: Path, layers: int, vocab: int, tied: bool = False) -> str:
    config = {
        "model_type": "llama", "vocab_size": vocab, "hidden_size": 64, "intermediate_size": 160,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 512, "tie_word_embeddings": tied,
    }  # fmt: skip
    path = tmp_path / f"llama{layers}_{vocab}_{tied}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


CASES = [
    ("FSDP2, a large vocabulary", dict(layers=2, vocab=8192), dict(seq=32, batch=1)),
    ("FSDP1's flat parameters, no_sync over 2", dict(layers=3, vocab=2048),
     dict(seq=128, batch=2, accumulate_unsharded=2, fsdp_flat=True)),
    ("4 GPUs, foreach AdamW", dict(layers=2, vocab=4096), dict(seq=64, batch=2, gpus=4,
                                                              foreach=True)),
    ("mixed precision", dict(layers=2, vocab=4096), dict(seq=64, batch=2, precision="mixed")),
]  # fmt: skip


def _config(model: str, loss: str, **extra: object) -> TrainingConfig:
    values: dict = dict(precision="bf16", target="cuda", fsdp=True, gpus=2, litgpt_norm=True)
    return TrainingConfig(model=model, loss=loss, **{**values, **extra})


@pytest.mark.parametrize(("what", "shape", "extra"), CASES)
def test_litgpt_s_full_script_under_fsdp_is_estimated_as_traced(
    tmp_path: Path, what: str, shape: dict, extra: dict
) -> None:
    cfg = _config(_model(tmp_path, **shape), "litgpt-full", **extra)
    est, traced = estimate(cfg), trace_step(cfg)
    assert -SLACK <= est.per_gpu_bytes - traced.peak_bytes <= SLACK, what
    assert any("fp32 copy (Fabric's output)" in m.calculation for m in est.moments), what


def test_the_loop_s_logits_are_in_fsdp_s_moments(tmp_path: Path) -> None:
    """The moments FSDP adds (the root gathered at forward's start, the LM head's and the root's
    unsharded gradients in backward) hold LitGPT's fp32 logits too: the previous micro-batch's
    at forward's start, this one's through backward — s·b·V·4 B each beside PyTorch's loss."""
    model, seq, vocab = _model(tmp_path, 2, 8192, tied=True), 32, 8192
    ests = {
        loss: estimate(_config(model, loss, seq=seq, batch=1))
        for loss in ("cross-entropy", "litgpt-full")
    }
    moments = {loss: {m.name: m.bytes for m in e.moments} for loss, e in ests.items()}
    logits = seq * vocab * 4
    for name in ("forward start (the root gathered)", "end of backward (the root's gradients)"):
        assert moments["litgpt-full"][name] - moments["cross-entropy"][name] == logits, name
    last = next(m for m in ests["litgpt-full"].moments if m.name == "backward, last block")
    assert "the logits LitGPT's loop holds 1.0 MB" in last.calculation  # s·b·V·4 B, 2^20
