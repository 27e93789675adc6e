"""DoRA + QLoRA under autocast on GPT-NeoX's kind of decoder with a vocabulary small next to its
blocks: the last block's adapted up, down or fused query_key_value holds the step's peak inside
peft's DoRA layer — B·A and the weight in fp32, the identity's graph and three fp32 s·b·o
products going forward, three fp32 f-wide products going back through up
(profiling.estimate.dora_neox_amp). The estimate read
`before` of the trace; now it equals the trace but for its scalars. An adapted o's 4-bit base
hands back the attention's 16 bits (DoRA's kept base output was counted fp32: +s·b·h·2 a layer
on Falcon, which has no bias; Llama's too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import neox_moments
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import LLAMA, llama_spec
from tests.profiling.trace.tiny_neox import BASE, SMALL, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

SHAPES = {"small": SMALL, "base": BASE}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")

# (kind, LoRA targets, seq × batch, precision, estimate ÷ trace before)
CASES = [
    # going forward at down's DoRA products
    ("gpt_neox", "q,k,v,o,up,down", (256, 2), "amp-bf16", 0.9633),
    ("gpt_neox", "q,k,v,down", (128, 3), "amp-bf16", 0.9657),
    ("gpt_neox sequential", "q,k,v,o,up,down", (256, 2), "amp-fp16", 0.9717),
    ("phi", "q,v,down", (256, 2), "amp-bf16", 0.9545),
    ("falcon-40b", "q,k,v,down", (256, 2), "amp-bf16", 0.9398),
    # going forward at up's, less what GELU saves later (Phi's gelu_new four fp32 tensors)
    ("gpt_neox", "q,k,v,up", (256, 2), "amp-bf16", 0.8756),
    ("falcon-40b", "q,k,v,up", (128, 3), "amp-bf16", 0.9368),
    # going back through up's DoRA
    ("falcon-7b", "q,k,v,up", (256, 2), "amp-bf16", 0.9187),
    ("phi", "q,k,v,up", (256, 2), "amp-bf16", 1.0000),
    # an adapted o: its kept base output 16-bit (Falcon: no bias to subtract)
    ("falcon-7b", "q,k,v,o,up,down", (256, 2), "amp-bf16", 0.9930),
    # GPT-NeoX's fused query_key_value alone: at its DoRA, the block's later tensors not made
    ("gpt_neox", "q,k,v", (256, 2), "amp-bf16", 0.9972),
    ("gpt_neox", "q,k,v", (128, 3), "amp-fp16", 0.9905),
]


@pytest.mark.parametrize(("kind", "targets", "tokens", "precision", "before"), CASES)
def test_dora_on_a_4bit_mlp_under_autocast_equals_the_trace(
    tmp_path: Path, kind: str, targets: str, tokens: tuple[int, int], precision: str,
    before: float,
) -> None:  # fmt: skip
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, kind, SMALL), seq=tokens[0], batch=tokens[1],
        precision=precision, qlora=True, dora=True, lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == seen[category], category
    assert est.peak_moment in (neox_moments.FORWARD, neox_moments.BACKWARD)
    # the trace's peak, to its scalars (the loss's, counted: 8 B over here)
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 64


@pytest.mark.parametrize("targets", ["q,k,v,o", "all-linear"])
def test_llama_dora_qlora_o_keeps_16_bit_base_output(tmp_path: Path, targets: str) -> None:
    """Llama's o_proj under QLoRA + autocast: its 4-bit base reads the attention's 16-bit output
    and hands back 16 bits, which DoRA keeps (was counted fp32: 32,768 B over on 64 × 2)."""
    cfg = TrainingConfig(
        model=llama_spec(tmp_path, LLAMA), seq=64, batch=2, precision="amp-bf16", qlora=True,
        dora=True, lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.category_bytes("activations") == traced.phases["after_forward"]["activations"]
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 64
