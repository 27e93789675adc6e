"""peft's DoRA on a Llama's gate or up, with and without QLoRA, on a vocabulary small next to
the blocks (128 beside h 128, f 512): the last block's DoRA layer going back holds the step's
peak — the gradient reaching it (in fp32 where the magnitude promotes a 16-bit base output, with
the base branch's 16-bit copy), the scaled gradient and ``mul``'s two products beside it
(profiling.estimate.llama_dora_mlp); under autocast on a 4-bit base the SwiGLU's three
gradients (``llama_end``, which DoRA in the MLP had switched off). The estimate read `before`
of the trace; now it equals it."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import llama_dora_mlp, llama_end
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import SMALL_VOCAB, WIDE, llama_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

UP, GATE, MLP = llama_dora_mlp.UP, llama_dora_mlp.GATE, llama_end.MLP
# (LoRA targets, seq × batch, precision, QLoRA, the peak moment, estimate ÷ trace before)
CASES = [
    ("q,v,up", (256, 2), "amp-bf16", True, UP, 0.950),
    ("k,gate", (256, 2), "amp-bf16", True, MLP, 0.947),
    ("q,v,up", (256, 2), "mixed", True, UP, 0.887),
    ("k,gate", (128, 3), "mixed", True, GATE, 0.965),
    ("q,v,up", (256, 2), "amp-bf16", False, UP, 0.874),
    ("k,gate", (256, 2), "mixed", False, GATE, 0.939),
    ("k,gate", (256, 2), "amp-bf16", False, GATE, 0.922),
]


@pytest.mark.parametrize(("targets", "tokens", "precision", "qlora", "moment", "before"), CASES)
def test_dora_on_gate_or_up_goes_back_as_counted(
    tmp_path: Path,
    targets: str,
    tokens: tuple[int, int],
    precision: str,
    qlora: bool,
    moment: str,
    before: float,
) -> None:
    cfg = TrainingConfig(
        model=llama_spec(tmp_path, SMALL_VOCAB), seq=tokens[0], batch=tokens[1],
        precision=precision, qlora=qlora, dora=True, lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == moment
    assert est.per_gpu_bytes == traced.peak_bytes, (before, est.per_gpu_bytes / traced.peak_bytes)


def test_dora_on_down_or_the_head_is_not_read_here() -> None:
    """Down's DoRA layer goes back before the SwiGLU's gradients: not these moments."""
    for targets, read in (("q,v,up", True), ("k,gate", True), ("gate,down", False),
                          ("up,lm_head", False), ("q,v", False)):  # fmt: skip
        cfg = TrainingConfig(model="llama-7b", dora=True, lora_rank=8, lora_targets=targets)
        assert llama_dora_mlp.applies(cfg) is read, targets


# h 256, f 1024, V 256, tied (the sweep's llama-wide): on 256×2 tokens up's DoRA sum in the last
# block's forward, not the weight's norm, holds the peak; with lora_dropout peft's rerun too
WIDE_TIED = {**WIDE, "tie_word_embeddings": True}
# (shape, precision, lora_dropout, estimate − trace now: a bound, estimate ÷ trace before)
FORWARD_CASES = [
    (WIDE_TIED, "mixed", 0.0, 0, 0.959),
    (WIDE_TIED, "amp-bf16", 0.0, 122_880, 0.996),
    (SMALL_VOCAB, "amp-bf16", 0.1, 28_672, 0.888),
]


@pytest.mark.parametrize(("shape", "precision", "dropout", "above", "before"), FORWARD_CASES)
def test_dora_up_sums_in_the_last_blocks_forward(
    tmp_path: Path, shape: dict, precision: str, dropout: float, above: int, before: float
) -> None:
    cfg = TrainingConfig(
        model=llama_spec(tmp_path, shape), seq=256, batch=2, precision=precision, qlora=True,
        dora=True, lora_rank=8, lora_targets="q,v,up", lora_dropout=dropout,
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == llama_dora_mlp.SUM
    assert est.per_gpu_bytes - traced.peak_bytes == above, before
