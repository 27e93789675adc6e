"""LoRA on an encoder under autocast, its backward phase: BERT's and RoBERTa's adapted up
projection goes back through lora_B (B's 16-bit weight gradient and input gradient) and lora_A
(A's input gradient and its fp32 cast, B's fp32 weight gradient) above GELU's moment, and ViT's
final LayerNorm goes back holding its saved input and statistics. Each was below the trace's
backward-phase peak: 3,584 B (BERT, q, v, up), 6,144 B (MLP width 256), 12,320 B (ViT). Checked
per category, at the peak and each phase's highest moment against the trace of transformers'
module with peft's adapters."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.profiling.trace.tiny_encoders import ATTN_UP, CLASSIFIERS, phases_are_the_trace, tiny

RUNS = [
    ("bert", "amp-bf16", ["q", "v", "up"], 8, {}, "none"),  # lora_A's backward
    ("bert", "amp-bf16", ["q", "v", "up"], 16, {"intermediate_size": 256}, "none"),  # lora_B's
    ("bert", "amp-fp16", ["up"], 8, {}, "none"),
    ("roberta", "amp-bf16", ATTN_UP, 8, {}, "none"),
    ("vit", "amp-bf16", ["q", "v", "up"], 8, {}, "none"),  # the final LayerNorm's backward
    ("vit", "amp-bf16", ["q", "v"], 4, {}, "none"),
    ("bert", "amp-bf16", ["q", "v", "up"], 8, {}, "full"),
]


@pytest.mark.parametrize(("family", "precision", "targets", "rank", "extra", "ckpt"), RUNS)
def test_the_backward_phase_is_the_trace(
    tmp_path: Path, family: str, precision: str, targets: list[str], rank: int, extra: dict,
    ckpt: str,
) -> None:  # fmt: skip
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    cfg = tiny(
        tmp_path, CLASSIFIERS[family], extra, lora_rank=rank, lora_targets=targets,
        precision=precision, checkpointing=ckpt,
    )  # fmt: skip
    # under full checkpointing the forward moments are the blocks' own (not named "forward")
    phases_are_the_trace(cfg, ("forward", "backward") if ckpt == "none" else ("backward",))
