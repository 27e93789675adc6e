"""Plain LoRA on GPT-NeoX's kind of decoder made wide next to its tokens (h 256, f 1024, V 256,
16 tokens): the adapters' own moments, not the loss, lead the step — the last block's MLP going
back (bf16, fp32), the optimizer's foreach step over the fp32 adapters (mixed), the loss inside
the model's forward under autocast. The estimate read 0.955-0.996 of the trace going back
before the last block's MLP was a moment (BLOOM the lowest), 0.993-0.995 at mixed's step and
0.997-0.998 at autocast's loss; now it is never below but for the trace's scalars."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import neox_moments
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import WIDE, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

ALL_SIX = "q,k,v,o,up,down"


def _traced_and_estimated(tmp_path: Path, kind: str, precision: str, targets: str):
    cfg = TrainingConfig(model=neox_spec(tmp_path, kind, WIDE), seq=16, batch=1,
                         precision=precision, lora_rank=8, lora_targets=targets)  # fmt: skip
    return trace_step(cfg), estimate(cfg)


@pytest.mark.parametrize("kind", ["gpt_neox", "falcon-7b", "bloom"])
@pytest.mark.parametrize(("precision", "targets"), [("bf16", "q,v"), ("fp32", ALL_SIX)])
def test_the_last_blocks_mlp_going_back_holds_the_peak(
    tmp_path: Path, kind: str, precision: str, targets: str
) -> None:
    traced, est = _traced_and_estimated(tmp_path, kind, precision, targets)
    assert traced.peak_phase == "backward"
    assert est.peak_moment == neox_moments.BACKWARD
    # the trace's scalars (the loss, Adam's step counts, SDPA's seeds: 8-328 B here) aside
    assert traced.peak_bytes - 512 <= est.per_gpu_bytes <= traced.peak_bytes * 1.0002


@pytest.mark.parametrize("kind", ["gpt_neox", "falcon-7b"])
def test_mixed_loras_fp32_adapters_are_stepped_by_foreach(tmp_path: Path, kind: str) -> None:
    """Under mixed, LoRA's fp32 adapters are a plain optimizer's (no master copies: those are
    full training's, ``trace.master_weights``): foreach AdamW's step makes one list of every
    adapter's size, not one tensor's fp32 gradient and scratch (0.993-0.995 of the trace)."""
    traced, est = _traced_and_estimated(tmp_path, kind, "mixed", ALL_SIX)
    assert traced.peak_phase == "optimizer_step"
    assert est.peak_moment == "optimizer step"
    gradients = traced.after_step["gradients"]
    temps = [c.bytes for c in est.components if c.name.startswith("Optimizer step temporaries")]
    assert temps == [gradients]  # fp32 adapters: Ψ_trained · 4 B
    assert traced.peak_bytes - 512 <= est.per_gpu_bytes <= traced.peak_bytes


@pytest.mark.parametrize(
    ("kind", "precision", "targets"),
    [("gpt_neox", "amp-bf16", "q,k,v"), ("falcon-40b", "amp-bf16", ALL_SIX),
     ("bloom", "amp-fp16", "q,v"), ("phi", "amp-bf16", "k,up,lm_head")],
)  # fmt: skip
def test_the_loss_inside_the_forward_under_autocast(
    tmp_path: Path, kind: str, precision: str, targets: str
) -> None:
    """transformers' loss runs inside the model's forward, which still holds the final
    LayerNorm's fp32 output, and autocast's cache the first block's A copies nothing saved:
    both beside the loss's logits (s·b·h·4 + A·2 B: 28,672 B with q, k, v here)."""
    traced, est = _traced_and_estimated(tmp_path, kind, precision, targets)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == "loss forward"
    assert traced.peak_bytes - 512 <= est.per_gpu_bytes <= traced.peak_bytes


@pytest.mark.parametrize(
    ("kind", "targets", "before"),
    [("gpt_neox", "v,down", 0.9885), ("gpt_neox", ALL_SIX, 0.9983),
     ("falcon-40b", "q,down", 0.9852), ("phi", "v,down", 0.9962)],
)  # fmt: skip
def test_mixed_loras_dropout_holds_down_s_input_cast(
    tmp_path: Path, kind: str, targets: str, before: float
) -> None:
    """peft casts down's input to the fp32 adapters (``x = self._cast_input_dtype(...)``) and
    with lora_dropout keeps only the dropped copy: the cast lives beside it until the adapter
    returns, the step's peak here (s·b·f·4: the estimate read `before` of the trace)."""
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, WIDE), seq=16, batch=1, precision="mixed", lora_rank=8,
        lora_targets=targets, lora_dropout=0.1,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == neox_moments.FORWARD
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 64  # the loss's scalars


@pytest.mark.parametrize("kind", ["gpt_neox sequential", "gpt_neox", "falcon-7b"])
def test_mixed_an_adapted_up_going_back_holds_two_fp32_gradients(tmp_path: Path, kind: str) -> None:
    """Under `mixed` peft's ``result.to(torch_result_dtype)`` hands an adapted up's base output
    back its gradient in fp32, beside the scaled update's (B output's) gradient: two fp32 f-wide
    gradients with GELU's saved input freed (the sequential block's backward peak; the forward
    moment's old over-count hid it: 0.9981 of the trace with the forward counted exactly)."""
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, WIDE), seq=16, batch=1, precision="mixed", lora_rank=8,
        lora_targets="k,up,lm_head",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    back = next(m for m in est.moments if m.name == neox_moments.BACKWARD)
    assert "at up's adapter" in back.calculation
    # never below; above by the head adapter's kept tensors (s·b·(h + r)·4, left in) at most
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 16 * (256 + 8) * 4 + 64
