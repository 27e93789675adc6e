"""DoRA on the LM head (peft's use_dora with lm_head in target_modules; the estimate refused it):
the head's kept tensors and magnitudes, its forward at ``(mns − 1)·base + mns·B(x)·scale``, its
norm rebuild (a bound) and the loss backward's first steps through it, against the trace of
peft's own layers on Llama-family models in four precisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from tests.profiling.trace.test_dora import LLAMA, _measure

FWD, NORM = "forward, the LM head's DoRA output", "forward, the LM head's DoRA weight norm"
BWD = "loss backward, through the LM head's DoRA"
HEAD = {**LLAMA, "vocab_size": 768, "tie_word_embeddings": False}
WIDE = {**HEAD, "hidden_size": 256, "intermediate_size": 1024, "vocab_size": 256}
# (model, precision, targets, rank, the moment that is the step's peak, the trace's phase)
CASES = {
    "transformers, fp32, q,v": (HEAD, "fp32", "q,v", 8, FWD, "forward"),
    "transformers, bf16, q,v": (HEAD, "bf16", "q,v", 8, "loss backward", "backward"),
    "transformers, mixed, all-linear": (HEAD, "mixed", "all-linear", 8, FWD, "forward"),
    "transformers, amp-bf16, q,v, r 16": (HEAD, "amp-bf16", "q,v", 16, BWD, "backward"),
    "transformers, mixed, tied": ({**LLAMA, "tie_word_embeddings": True}, "mixed", "q,v", 8,
                                  FWD, "forward"),
    "ours, fp32, all-linear": ("tiny-llama", "fp32", "all-linear", 8, FWD, "forward"),
    "ours, bf16, q,v": ("tiny-llama", "bf16", "q,v", 8, "loss backward", "backward"),
}  # fmt: skip


def _config(tmp_path: Path, spec: tuple, tokens: tuple[int, int] = (24, 2)) -> TrainingConfig:
    """(model, precision, targets, rank) with lm_head adapted too, on s × b ``tokens``."""
    model, precision, targets, rank = spec
    if isinstance(model, dict):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(model), encoding="utf-8")
        model = f"hf:{path}"
    seq, batch = (32, 2) if model == "tiny-llama" else tokens
    return TrainingConfig(model=model, seq=seq, batch=batch, precision=precision,
                          lora_rank=rank, lora_targets=f"{targets},lm_head", dora=True)  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_dora_on_the_lm_head_is_estimated_as_traced(tmp_path: Path, case: str) -> None:
    """Parameters, gradients and optimizer state to the byte (the head's V magnitudes as peft
    trains them); activations and the peak within the plain LoRA gap of these models (the
    loss's scalars, transformers' small buffers: under 128 B below; at most 64 B above, where
    the step's scalars are counted at a moment before the loss makes them, the safe side); the
    moment that is the peak is the trace's peak of that phase."""
    model, precision, targets, rank, moment, phase = CASES[case]
    cfg = _config(tmp_path, (model, precision, targets, rank))
    est, seen, traced = _measure(cfg, model != "tiny-llama")
    for name in ("parameters", "gradients", "optimizer"):
        assert est[name] == seen[name], (case, name)
    assert -64 <= seen["activations"] - est["activations"] <= 128, case
    assert -64 <= seen["peak"] - est["peak"] <= 128, (case, est["peak"], seen["peak"])
    moments = {m.name: m.bytes for m in estimate(cfg).moments}
    assert max(moments, key=lambda n: moments[n]) == moment, case
    assert traced.peak_phase == phase  # type: ignore[attr-defined]
    assert traced.model_info["lora"]["adapter_params"] == estimate(cfg).trainable_params  # type: ignore[attr-defined]


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_a_wide_heads_norm_rebuild_is_bounded(tmp_path: Path, precision: str) -> None:
    """Wide with few tokens (h 256, V 256, 16 tokens) the norm rebuilds lead the forward: the
    head's (``W + scale·B·A`` and ``scale·B·A`` beside its leftovers, counted before the head's
    B output and vectors are made: a bound) is alone above the trace's forward, and the step's
    estimate within 2 % of it."""
    cfg = _config(tmp_path, (WIDE, precision, "q,v", 8), (16, 1))
    est, seen, traced = _measure(cfg, True)
    moments = {m.name: m.bytes for m in estimate(cfg).moments}
    assert traced.peak_phase == "forward"  # type: ignore[attr-defined]
    assert seen["peak"] <= moments[NORM] <= est["peak"] <= 1.02 * seen["peak"]


@pytest.mark.parametrize(
    "extra",
    [{"lora_dropout": 0.1}, {"checkpointing": "full"}, {"qlora": True, "precision": "mixed"}],
)
def test_what_dora_on_the_head_does_not_model_is_one_sentence(extra: dict) -> None:
    cfg = TrainingConfig(**{"model": "tiny-llama", "lora_rank": 8, "dora": True,
                            "lora_targets": "q,v,lm_head", **extra})  # fmt: skip
    with pytest.raises(ProfilingError, match=r"DoRA on the LM head with --lora-dropout"):
        estimate(cfg)
