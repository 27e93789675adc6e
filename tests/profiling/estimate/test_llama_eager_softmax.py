"""transformers' Llama with eager attention at a long sequence, no checkpointing: the last
block's softmax going back (two fp32 s² tensors beside the fp32 probabilities) is the step's
peak, which the estimate missed — 0.965 of the trace at bf16 2 × 512 (−1,737,216 B), mixed
0.968, autocast 0.978, LoRA 0.932, LoRA with attention dropout 0.980
(profiling.estimate.llama_eager_softmax).
"""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import llama_eager_softmax
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import llama_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# h 128, four heads, two key/value heads, f 352, V 512: at 512 tokens the s² tensors lead
TOY = {"model_type": "llama", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 352,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
LORA: dict[str, Any] = {"lora_rank": 8}  # peft on q, k, v, o (the default targets)
# (precision, seq, batch, extra settings): equal to the trace
EXACT = {
    "bf16 2x512": ("bf16", 512, 2, {}),  # 0.965 before
    "fp32 1x512": ("fp32", 512, 1, {}),
    "mixed 2x512": ("mixed", 512, 2, {}),  # 0.968
    "amp-bf16 2x512": ("amp-bf16", 512, 2, {}),  # 0.978
    "bf16 dropout 1x1024": ("bf16", 1024, 1, {"dropout": 0.1}),
    "bf16 lora 2x512": ("bf16", 512, 2, LORA),  # 0.932
    "bf16 lora dropout 2x512": ("bf16", 512, 2, {**LORA, "dropout": 0.1}),  # 0.980
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return llama_spec(tmp_path_factory.mktemp("toy"), TOY)


def _config(model: str, precision: str, seq: int, batch: int, extra: dict) -> TrainingConfig:
    return TrainingConfig(model=model, precision=precision, seq=seq, batch=batch,
                          attention="eager", target="cuda", **extra)  # fmt: skip


@pytest.mark.parametrize("case", list(EXACT))
def test_the_last_blocks_softmax_going_back_equals_the_trace(model: str, case: str) -> None:
    cfg = _config(model, *EXACT[case])
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == llama_eager_softmax.NAME, case
    assert est.per_gpu_bytes == traced.peak_bytes, case


@pytest.mark.parametrize(
    ("precision", "extra"),
    [("bf16", {**LORA, "lora_dropout": 0.1}), ("amp-bf16", LORA)],  # 0.948, 0.951 before
)
def test_adapters_own_copies_are_a_bound(model: str, precision: str, extra: dict) -> None:
    """With lora_dropout (or autocast's copies) each adapter keeps its own input: the frozen
    o_proj's input, the attention's output, is then not kept, which the block's count still
    holds (s·b·q·2 more in the first block: a bound)."""
    cfg = _config(model, precision, 512, 2, extra)
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == llama_eager_softmax.NAME
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + 512 * 2 * 128 * 2


def test_not_counted_under_sdpa_or_checkpointing(model: str) -> None:
    """Nor the CPU's kernels: not read."""
    for extra in ({"attention": "sdpa"}, {"checkpointing": "full"},
                  {"checkpointing": "selective"}, {"target": "cpu"}):  # fmt: skip
        values = {"model": model, "seq": 512, "batch": 2, "precision": "bf16",
                  "attention": "eager", "target": "cuda", **extra}  # fmt: skip
        names = {m.name for m in estimate(TrainingConfig.model_validate(values)).moments}
        assert llama_eager_softmax.NAME not in names, extra


def test_short_sequences_keep_their_peak(model: str) -> None:
    """At 64 tokens the loss leads: the moment is counted, below it."""
    est = estimate(_config(model, "bf16", 64, 2, {}))
    moments = {m.name: m.bytes for m in est.moments}
    assert llama_eager_softmax.NAME in moments
    assert est.peak_moment != llama_eager_softmax.NAME
