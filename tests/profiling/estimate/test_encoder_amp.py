"""A BERT classifier without checkpointing, full training: under autocast its MLP going back
past the output projection's 16-bit gradients (profiling.estimate.encoder_amp: the fp32 weight
gradients cast beside the 16-bit ones, at the last and the first block) — bert-wide amp-bf16
8-bit Adam read 0.9635 of the trace (−667,112 B), amp-fp16 SGD 0.9692; and with SGD on few
tokens the embeddings going back (profiling.estimate.encoder_embeddings: every gradient made,
the embeddings' sum's gradient beside the word embedding's) — fp32 32 × 1 −32,776 B, bf16
−16,388 B, 16 × 1 half that. Now equal to the byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.estimate import encoder_embeddings, encoder_first
from tests.profiling.estimate.test_encoder_first import estimate_and_trace

pytest.importorskip("transformers", reason="the hf extra is not installed")

BERT = {
    "model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": 256,
    "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 130,
}  # fmt: skip
SMALL = {**BERT, "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512}
BASE = {**BERT, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160}
EMBEDDINGS = encoder_embeddings.NAME
SGD = {"optimizer": "sgd"}
# (config, fields, the moment or None: any, equal): the old ratio or difference in the comment
CASES = {
    "wide amp-bf16 adam8bit": (BERT, {"precision": "amp-bf16"}, encoder_first.FIRST_INPUT),
    "wide amp-fp16 sgd": (BERT, {"precision": "amp-fp16", **SGD}, None),  # 0.9692
    "wide amp-bf16 adamw": (BERT, {"precision": "amp-bf16", "optimizer": "adamw"}, None),
    "small amp-bf16 adam8bit": (SMALL, {"precision": "amp-bf16"}, None),
    "base amp-fp16 adam8bit 3 blocks": (
        {**BASE, "num_hidden_layers": 3}, {"precision": "amp-fp16"}, None),
    "wide fp32 sgd 32x1": (BERT, {"seq": 32, "batch": 1, **SGD}, EMBEDDINGS),  # −32,776 B
    "wide bf16 sgd 16x1": (BERT, {"seq": 16, "batch": 1, "precision": "bf16", **SGD},
                           EMBEDDINGS),  # −8,196 B
    "wide amp-bf16 sgd 32x1": (BERT, {"seq": 32, "batch": 1, "precision": "amp-bf16", **SGD},
                               None),
    "wide fp32 sgd 32x1 full checkpointing": (
        BERT, {"seq": 32, "batch": 1, "checkpointing": "full", **SGD}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_the_encoders_backward_equals_the_trace(case: str, tmp_path: Path) -> None:
    config, fields, moment = CASES[case]
    est, traced = estimate_and_trace(config, fields, tmp_path)
    if moment is not None:
        assert est.peak_moment == moment
    assert est.per_gpu_bytes == traced.peak_bytes, est.per_gpu_bytes - traced.peak_bytes
