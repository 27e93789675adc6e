"""A recomputed block's backward (full checkpointing, eager) on bitsandbytes' 4-bit base and
DoRA under autocast (profiling.estimate.recomputed_eager): the estimate must not fall below the
trace. Before, QLoRA kept the earlier bound (end of forward + one block), 0.74-0.95 of the
trace on these small-vocabulary models, and DoRA with full checkpointing under autocast or on a
4-bit base was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from tests.profiling.estimate.recomputed_checks import check_recomputed_bound

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

BASE = {
    "model_type": "llama", "vocab_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
SHAPES = {
    "small": {"hidden_size": 128, "intermediate_size": 256},  # the vocabulary h's size
    # h wide next to f and a short sequence: the recomputed q's norm rebuild leads, where the
    # trace used to hold B's 16-bit output beside its fp32 cast (trace.dora)
    "tall": {"hidden_size": 1024, "intermediate_size": 256},
}

# (shape, seq × batch, our blocks, precision, 4-bit base, DoRA, targets, lora_dropout)
CASES = {
    "LoRA, transformers, mixed, QLoRA, all": ("small", 64, 0, "mixed", 1, 0, "all-linear", 0),
    "LoRA, transformers, bf16, QLoRA, all-linear": ("small", 64, 0, "bf16", 1, 0, "all-linear", 0),
    "LoRA, ours, amp-bf16, QLoRA, all-linear, dropout": (
        "small", 64, 1, "amp-bf16", 1, 0, "all-linear", 0.1,
    ),
    "DoRA, transformers, amp-bf16, q,v": ("small", 64, 0, "amp-bf16", 0, 1, "q,v", 0),
    "DoRA, ours, amp-fp16, all-linear": ("small", 64, 1, "amp-fp16", 0, 1, "all-linear", 0),
    "DoRA, transformers, mixed, QLoRA, all": ("small", 64, 0, "mixed", 1, 1, "all-linear", 0),
    "DoRA, ours, mixed, QLoRA, all-linear, dropout": (
        "small", 64, 1, "mixed", 1, 1, "all-linear", 0.1,
    ),
    "DoRA, transformers, amp-bf16, QLoRA, all-linear": (
        "small", 64, 0, "amp-bf16", 1, 1, "all-linear", 0,
    ),
    "DoRA, transformers, amp-bf16, QLoRA, q, tall": ("tall", 16, 0, "amp-bf16", 1, 1, "q", 0),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_recomputed_block_on_a_4bit_base_or_dora_is_never_below_the_trace(
    tmp_path: Path, case: str
) -> None:
    shape, seq, ours, precision, qlora, dora, targets, dropout = CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **SHAPES[shape]}), encoding="utf-8")
    cfg = TrainingConfig(model=f"hf:{path}", seq=seq, batch=2 if seq > 16 else 1,
                         precision=precision, lora_rank=8, lora_targets=targets,
                         lora_dropout=dropout, qlora=bool(qlora), dora=bool(dora),
                         checkpointing="full")  # fmt: skip
    check_recomputed_bound(cfg, ours, case, most=1.17)
