"""LoRA on encoder classifiers without autocast (bf16, fp32; was refused): BERT's and
RoBERTa's last output LayerNorm and up adapter in forward, ViT's last MLP in forward, the up
adapter's backward; and an adapted down projection under autocast (was refused, its forward
peak 48 KB above the estimate): peft's fp32 cast of GELU's 16-bit output before lora_A, in
forward at the last block's down adapter and in lora_A's backward — estimated to the byte
against the trace of transformers' module with peft's adapters, per category, at the peak and
in each phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.profiling.trace.tiny_encoders import ATTN_UP, CLASSIFIERS, phases_are_the_trace, tiny

FAMILIES = CLASSIFIERS
WIDE = {"intermediate_size": 256, "num_hidden_layers": 3}  # the forward's up adapter the higher

RUNS = [
    ("bert", "bf16", ["q", "v"], 8, {}),  # the forward's last output LayerNorm is the peak
    ("bert", "fp32", ["k", "up"], 8, {}),  # the up adapter's backward
    ("bert", "bf16", ATTN_UP, 4, WIDE),
    ("roberta", "fp32", ATTN_UP, 8, {}),
    ("vit", "bf16", ["q", "v"], 8, {}),
    ("vit", "fp32", ATTN_UP, 4, {}),  # the forward's last MLP within 0.2 % of the backward's
    ("bert", "bf16", ["q", "v", "down"], 8, {}),  # the down adapter's backward
    ("bert", "bf16", ["q", "v", "down"], 4, {"intermediate_size": 96}),
    ("vit", "bf16", ["q", "v", "down"], 8, {}),
    # under autocast: the down adapter's fp32 input cast
    ("bert", "amp-bf16", ["q", "v", "down"], 8, {}),
    ("bert", "amp-fp16", ["q", "v", "down"], 8, {"intermediate_size": 96}),
    ("roberta", "amp-bf16", [*ATTN_UP, "down"], 8, {}),
    ("vit", "amp-bf16", ["q", "down"], 8, {}),
    ("bert", "amp-bf16", ["down"], 8, {}),  # no q, k, v either
]


@pytest.mark.parametrize(("family", "precision", "targets", "rank", "extra"), RUNS)
def test_a_classifier_s_phases_are_the_trace(
    tmp_path: Path, family: str, precision: str, targets: list[str], rank: int, extra: dict
) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = tiny(
        tmp_path, FAMILIES[family], extra, lora_rank=rank, lora_targets=targets,
        precision=precision,
    )  # fmt: skip
    phases_are_the_trace(cfg, ("forward", "backward"))  # each phase's highest moment
