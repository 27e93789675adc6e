"""peft's DoRA on a Llama's down projection, on a vocabulary small next to the blocks (V 128
beside h 128, f 512, tied: the sweep's llama-small) at 256 × 2 tokens: the last block's DoRA sum
at down, in the forward, holds the step's peak under autocast — beside down's input, peft's fp32
cast of it, the identity's graph and ``lora_weight`` (f wide), ``(mns − 1)·result``, the scaled
``mns·lora_result`` and their sum (profiling.estimate.llama_dora_down). The estimate had no such
moment (``llama_end`` refused DoRA on down): its largest weight norm's rebuild read `before` of
the trace; now the estimate equals it. In the other precisions the weight norm's bound still
leads (1.01-1.09 of the trace), and the new moment equals the trace's peak there too."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import llama_dora_down, llama_end
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import SMALL_VOCAB, llama_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

SMALL_TIED = {**SMALL_VOCAB, "tie_word_embeddings": True}
# (LoRA targets, precision, QLoRA, lora_dropout, estimate − trace before: the weight norm's
# rebuild; with dropout peft reruns the base layer: its first output and the dropped input live)
CASES = [
    ("q,v,down", "amp-bf16", False, 0.0, -499_832),
    ("all-linear", "amp-bf16", False, 0.0, -501_880),
    ("q,v,down", "amp-bf16", True, 0.0, -237_688),
    ("all-linear", "amp-fp16", True, 0.0, -239_736),
    ("q,v,down", "amp-bf16", False, 0.1, -1_679_480),
    ("all-linear", "mixed", True, 0.1, -790_648),
]


def _config(
    tmp_path: Path, targets: str, precision: str, qlora: bool, dropout: float = 0.0
) -> TrainingConfig:
    return TrainingConfig(
        model=llama_spec(tmp_path, SMALL_TIED), seq=256, batch=2, precision=precision,
        qlora=qlora, dora=True, lora_rank=8, lora_targets=targets, lora_dropout=dropout,
    )  # fmt: skip


@pytest.mark.parametrize(("targets", "precision", "qlora", "dropout", "before"), CASES)
def test_dora_on_down_sums_in_the_last_blocks_forward(
    tmp_path: Path, targets: str, precision: str, qlora: bool, dropout: float, before: int
) -> None:
    cfg = _config(tmp_path, targets, precision, qlora, dropout)
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    assert est.peak_moment == llama_dora_down.SUM
    assert est.per_gpu_bytes == traced.peak_bytes, before


# where the weight norm's rebuild, a bound, leads the estimate: the new moment is the trace's
NEIGHBOURS = [
    ("q,v,down", "fp32", False, 0.0),
    ("all-linear", "bf16", True, 0.1),
    ("v,gate,down", "mixed", False, 0.0),
    # lora_A on gate keeps the MLP norm's own output on the 4-bit base: +131,072 B (s·b·h·2)
    ("v,gate,down", "bf16", True, 0.0),
]


@pytest.mark.parametrize("case", NEIGHBOURS)
def test_the_sum_at_down_is_the_traced_peak_beneath_the_norms_bound(
    tmp_path: Path, case: tuple
) -> None:
    cfg = _config(tmp_path, *case)
    traced, est = trace_step(cfg), estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert moments[llama_dora_down.SUM] == traced.peak_bytes
    assert est.per_gpu_bytes >= traced.peak_bytes


def test_what_dora_on_down_reads() -> None:
    """Down's DoRA layer going back is not read (no SwiGLU moment), the final norm's is; with
    DoRA on the head too, none of them."""
    for extra, read in (({}, True), ({"lora_dropout": 0.1}, True),
                        ({"lora_targets": "q,down,lm_head"}, False)):  # fmt: skip
        values: dict[str, object] = {"model": "hf:llama-2-7b", "seq": 256, "batch": 2,
                                     "lora_rank": 8, "dora": True, "lora_targets": "q,v,down",
                                     "precision": "amp-bf16", **extra}  # fmt: skip
        cfg = TrainingConfig.model_validate(values)
        assert llama_dora_down.applies(cfg) is read, extra
        names = {m.name for m in estimate(cfg).moments}
        assert (llama_dora_down.SUM in names) is read, extra
        assert llama_end.MLP not in names and llama_end.FORWARD not in names, extra


# eager attention: ``LlamaModel.forward`` holds its 4-D causal mask (b·s²·4 under autocast) as a
# local through every block, beside the last block's sums going forward; without it LoRA and
# DoRA q,v,down read −131,072 B (0.993, 0.994) and all-linear DoRA −262,144 B
EAGER = [("q,v,down", False), ("q,v,down", True), ("all-linear", True)]


@pytest.mark.parametrize(("targets", "dora"), EAGER)
def test_eager_attention_s_mask_is_held_through_the_forward(
    tmp_path: Path, targets: str, dora: bool
) -> None:
    cfg = TrainingConfig(
        model=llama_spec(tmp_path, SMALL_TIED), seq=256, batch=2, precision="amp-bf16",
        dora=dora, lora_rank=8, lora_targets=targets, attention="eager",
    )  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_phase == "forward"
    # above the trace by the attention's copies the estimate counts in every block (at most
    # two of s·b·h·2 per block: o's input and the first block's query are not kept)
    assert 0 <= est.per_gpu_bytes - traced.peak_bytes <= 2 * 2 * 256 * 2 * 128 * 2
