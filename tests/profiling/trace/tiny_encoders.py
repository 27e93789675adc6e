"""The tiny encoders (BERT, RoBERTa, ViT) the encoder trace-and-estimate tests build from a
config.json: one shape for all, each family's own fields on top."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
