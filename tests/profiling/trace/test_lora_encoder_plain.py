"""LoRA on encoder classifiers without autocast (bf16, fp32; was refused): BERT's and
RoBERTa's last output LayerNorm and up adapter in forward, ViT's last MLP in forward, the up
adapter's backward — estimated to the byte against the trace of transformers' module with
peft's adapters, per category, at the peak and in each phase."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from tests.profiling.trace.tiny_encoders import ATTN_UP, BASE, CLASSIFIERS, estimate_is_trace

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
]


@pytest.mark.parametrize(("family", "precision", "targets", "rank", "extra"), RUNS)
def test_a_classifier_without_autocast_is_the_trace(
    tmp_path: Path, family: str, precision: str, targets: list[str], rank: int, extra: dict
) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **FAMILIES[family], **extra}), encoding="utf-8")
    vit = family == "vit"
    cfg = TrainingConfig(
        model=f"hf:{path}", seq=None if vit else 64, batch=4 if vit else 2, lora_rank=rank,
        lora_targets=targets, precision=precision,
    )  # fmt: skip
    traced, est = estimate_is_trace(cfg)
    for phase in ("forward", "backward"):  # each phase's highest moment, to the byte
        named = [m.bytes for m in est.moments if m.name.startswith(phase)]
        assert max(named) == traced.phase_peaks[phase], phase
