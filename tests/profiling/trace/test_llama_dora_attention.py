"""DoRA + QLoRA under autocast on the attention alone of a Llama with a vocabulary small next to
its blocks (128 beside h 128, f 512): the MLP and the head stay frozen 4-bit layers, so the
last block's MLP going back holds the step's peak as under QLoRA — down's 4-bit base hands
back its fp32 input's gradient, then ``mul``'s two fp32 f-wide gradients
(profiling.estimate.llama_end, which DoRA had switched off). The estimate read `before` of the
trace; now it equals it."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import llama_end
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import SMALL_VOCAB, llama_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# (LoRA targets, seq × batch, precision, estimate ÷ trace before)
CASES = [
    ("q,v", (64, 2), "amp-bf16", 0.9571),
    ("q,k,v,o", (64, 2), "amp-bf16", 0.9619),
    ("q,v", (256, 2), "amp-bf16", 0.8796),
    ("q,k,v,o", (128, 3), "amp-fp16", 0.9006),
    ("q", (256, 2), "amp-fp16", 0.8730),
]


@pytest.mark.parametrize(("targets", "tokens", "precision", "before"), CASES)
def test_dora_on_the_attention_keeps_the_mlps_moment(
    tmp_path: Path, targets: str, tokens: tuple[int, int], precision: str, before: float
) -> None:
    cfg = TrainingConfig(
        model=llama_spec(tmp_path, SMALL_VOCAB), seq=tokens[0], batch=tokens[1],
        precision=precision, qlora=True, dora=True, lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.category_bytes("activations") == traced.phases["after_forward"]["activations"]
    assert est.peak_moment == llama_end.MLP
    assert est.per_gpu_bytes == traced.peak_bytes, (before, est.per_gpu_bytes / traced.peak_bytes)
