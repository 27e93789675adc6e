"""A Llama with an untied head trained whole, on few tokens: the embedding going back is the
step's last backward op (every other gradient made, the gradient reaching it alive,
``estimate.neox_embedding``), the peak where the optimizer's step makes no temporaries beyond it
(SGD, bitsandbytes' 8-bit Adam). The estimate had that moment for the GPT-NeoX kinds only:
llama-untied-l3 (V 512, h 64, f 160, 3 blocks) amp-fp16 8-bit Adam 16 × 1 read the optimizer
step, −4,104 B (s·b·h·4 + the loss's two scalars) below the trace (audit6 D64). Now equal."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import LLAMA, llama_spec

pytest.importorskip("transformers", reason="the models are traced as transformers' modules")

UNTIED = {**LLAMA, "num_hidden_layers": 3, "tie_word_embeddings": False}


@pytest.mark.parametrize(
    ("precision", "optimizer"),
    [("amp-fp16", "adam8bit"), ("fp32", "sgd"), ("bf16", "sgd")],
)
def test_the_embedding_going_back_on_few_tokens(
    tmp_path: Path, precision: str, optimizer: str
) -> None:
    cfg = TrainingConfig(model=llama_spec(tmp_path, UNTIED), seq=16, batch=1,
                         precision=precision, optimizer=optimizer)  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.peak_moment == "backward, the embedding"
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.peak_phase)
