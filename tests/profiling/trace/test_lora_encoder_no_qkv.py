"""LoRA on an encoder with none of q, k, v adapted (was refused): the first block keeps nothing
before its first adapted projection (SDPA's tensors, the LayerNorm after attention, GELU's
input), nor the weight copies there under autocast; BERT's frame holds the unsaved embeddings'
output and block input in forward — estimated to the byte against the trace of transformers'
module with peft's adapters, per category and at the peak."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.profiling.trace.tiny_encoders import CLASSIFIERS, estimate_is_trace, tiny

FAMILIES = {**CLASSIFIERS, "mlm": {"model_type": "bert", "architectures": ["BertForMaskedLM"]}}

RUNS = [
    ("mlm", "amp-bf16", ["up", "down"], "none"),
    ("mlm", "mixed", ["o"], "none"),  # peft's fp32 casts: o's adapter keeps a copy of its own
    ("bert", "bf16", ["o"], "none"),  # the forward's last output LayerNorm is the peak
    ("bert", "fp32", ["down"], "full"),
    ("roberta", "amp-bf16", ["up"], "none"),
    ("bert", "amp-bf16", ["o"], "full"),
    ("vit", "amp-bf16", ["o"], "full"),
    ("vit", "bf16", ["down"], "none"),
]


@pytest.mark.parametrize(("family", "precision", "targets", "ckpt"), RUNS)
def test_lora_without_q_k_v_is_the_trace(
    tmp_path: Path, family: str, precision: str, targets: list[str], ckpt: str
) -> None:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = tiny(
        tmp_path, FAMILIES[family], lora_rank=8, lora_targets=targets, precision=precision,
        checkpointing=ckpt,
    )  # fmt: skip
    _, est = estimate_is_trace(cfg)
    # without checkpointing, the first block's own term (the blocks keep only their inputs else)
    first = [c for c in est.components if "first block: nothing kept" in c.name]
    assert [c.bytes < 0 for c in first] == ([True] if ckpt == "none" else [])
