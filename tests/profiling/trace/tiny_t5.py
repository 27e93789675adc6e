"""The tiny encoder-decoders (T5 v1.0, Flan-T5, mT5) the T5 tests (LoRA, checkpointing) build
from a config.json: one shape for all, each kind's own fields on top."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from profiling.config import TrainingConfig

if TYPE_CHECKING:
    from profiling.estimate.memory import Estimate
    from profiling.trace.step import TraceResult

BASE = {
    "vocab_size": 512, "d_model": 64, "d_ff": 160, "num_layers": 2, "num_decoder_layers": 3,
    "num_heads": 4, "d_kv": 16,
}  # fmt: skip
FLAN = {"model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
KINDS = {
    "flan-t5": FLAN,
    # deeper stacks: each block below the top holds one gradient more than its checkpoint
    "flan-t5, 4 + 5 blocks": {**FLAN, "num_layers": 4, "num_decoder_layers": 5},
    # heads × d_kv (72) differs from d_model: o's input and q's, k's, v's outputs are 72 wide
    "mt5, q 72 wide": {"model_type": "mt5", "tie_word_embeddings": False, "d_kv": 24,
                       "num_heads": 3},
    # ReLU MLP, the head tied to the embedding (one V·h gradient for both)
    "t5 v1.0": {"model_type": "t5"},
    "t5 v1.0, 4 + 5 blocks": {"model_type": "t5", "num_layers": 4, "num_decoder_layers": 5},
}  # fmt: skip
# LoRA tests' lengths and rank unless a test gives its own
LORA = {"seq": 32, "target_seq": 24, "batch": 2, "lora_rank": 8}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def t5_config(tmp_path: Path, kind: str, **given: object) -> TrainingConfig:
    """A config of the tiny ``kind``, its config.json written under ``tmp_path``."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **KINDS[kind]}), encoding="utf-8")
    return TrainingConfig(model=f"hf:{path}", **given)


def lora_run(
    tmp_path: Path, kind: str, precision: str, targets: list, dropout: float, lengths: tuple,
    **given: object,
) -> TrainingConfig:  # fmt: skip
    """A LoRA run's config (lengths: seq, target, batch), the test skipped without transformers
    and peft (the hf and lora extras)."""
    import pytest

    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("peft", reason="the lora extra is not installed")
    seq, target, batch = lengths
    run = {"precision": precision, "lora_targets": targets, "lora_dropout": dropout,
           "seq": seq, "target_seq": target, "batch": batch}  # fmt: skip
    return t5_config(tmp_path, kind, **{**LORA, **given, **run})


def categories_are_the_trace(cfg: TrainingConfig) -> tuple[TraceResult, Estimate]:
    """The step traced and estimated, every category (what forward keeps; the gradients after
    the step) equal in both; both returned for the peak's own checks."""
    from profiling.estimate.memory import estimate
    from profiling.trace.step import trace_step

    traced, est = trace_step(cfg), estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == seen[category], category
    return traced, est
