"""The tiny encoders (BERT, RoBERTa, ViT) the encoder trace-and-estimate tests build from a
config.json: one shape for all, each family's own fields on top."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from profiling.config import TrainingConfig
    from profiling.estimate.memory import Estimate
    from profiling.trace.step import TraceResult

BASE = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 130,
}  # fmt: skip
CLASSIFIERS = {
    "bert": {"model_type": "bert", "architectures": ["BertForSequenceClassification"]},
    "roberta": {
        "model_type": "roberta", "type_vocab_size": 1, "pad_token_id": 1, "num_labels": 3,
        "architectures": ["RobertaForSequenceClassification"],
    },
    "vit": {"model_type": "vit", "image_size": 32, "patch_size": 8, "num_labels": 5},
}  # fmt: skip
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
ATTN_UP = ["q", "k", "v", "o", "up"]


def estimate_is_trace(cfg: TrainingConfig) -> tuple[TraceResult, Estimate]:
    """Trace and estimate ``cfg``; assert they agree to the byte in every category (after
    forward; the gradients after the step) and at the peak. (trace, estimate) for more checks."""
    from profiling.estimate.memory import estimate
    from profiling.trace.step import trace_step

    traced, est = trace_step(cfg), estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in CATEGORIES:
        assert est.category_bytes(category) == seen[category], category
    assert est.per_gpu_bytes == traced.peak_bytes
    return traced, est


def tiny(
    tmp_path: Path, fields: dict[str, object], extra: dict | None = None, **options: object
) -> TrainingConfig:
    """The tiny encoder of ``fields`` (a family's own, over ``BASE``; ``extra`` on top) written
    as its config.json under ``tmp_path``, run at seq 64 × batch 2 (ViT: its 17 patches × 4)."""
    from profiling.config import TrainingConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, **fields, **(extra or {})}), encoding="utf-8")
    vit = fields.get("model_type") == "vit"
    return TrainingConfig(
        model=f"hf:{path}", seq=None if vit else 64, batch=4 if vit else 2,
        **options,  # type: ignore[arg-type]  # the test's own keyword options
    )  # fmt: skip


def phases_are_the_trace(cfg: TrainingConfig, phases: tuple[str, ...]) -> Estimate:
    """``estimate_is_trace``, and each of ``phases``' highest moment the trace's phase peak."""
    traced, est = estimate_is_trace(cfg)
    for phase in phases:
        named = [m.bytes for m in est.moments if m.name.startswith(phase)]
        assert max(named) == traced.phase_peaks[phase], phase
    return est
