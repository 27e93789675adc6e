"""--compile with --optimizer-in-bwd (profiling.estimate.compiled_backward.waiting/stepped, and
under full checkpointing profiling.estimate.recomputed): the compiled block's backward graph was
not counted at all with the optimizer in backward (0.9375 of the trace on the V 64 toy, the
blocks holding the peak). Each parameter's post-accumulate-grad hook steps it and drops its
gradient as its AccumulateGrad runs, so while a block's graph runs no head's, final norm's or
above block's gradient waits — except a tied head's, whose AccumulateGrad waits for the
embedding's gradient too — and the block's own gradients all come back at once when its graph
returns, the first parameter stepped beside them."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import compiled_backward, recomputed
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.estimate import test_compiled_backward as compiled_toys

# the same module-scoped config files as test_compiled_backward's (pytest finds the fixture
# by this module's attribute)
models = compiled_toys.models


def _cfg(model: str, **extra: object) -> TrainingConfig:
    return compiled_toys._cfg(model, **{"optimizer_in_bwd": True, **extra})


# (model, extra, the moment at the estimate's peak): estimate ÷ trace before
CASES: dict[str, tuple[str, dict[str, object], str]] = {
    "llama bf16 (the issue's, 0.9375)": ("llama", {}, compiled_backward.NAME),
    "llama fp32": ("llama", {"precision": "fp32"}, compiled_backward.NAME),
    "llama amp-bf16": ("llama", {"precision": "amp-bf16"}, compiled_backward.NAME),
    "llama lora": ("llama", {"lora_rank": 8}, compiled_backward.NAME),
    "llama chunked loss": ("llama", {"loss": "chunked"}, compiled_backward.NAME),
    "neox bf16": ("neox", {}, compiled_backward.NAME),
    "neox lora": ("neox", {"lora_rank": 8}, compiled_backward.NAME),
    # the tied head's V·h gradient waits in the engine's input buffer for the embedding's
    "gpt2 bf16 (tied)": ("gpt2", {}, compiled_backward.NAME),
    "llama full checkpointing (0.891)": ("llama", {"checkpointing": "full"}, recomputed.NAME),
    "llama lora full checkpointing (0.797)": (
        "llama",
        {"checkpointing": "full", "lora_rank": 8},
        recomputed.NAME,
    ),
    "gpt2 full checkpointing (tied)": ("gpt2", {"checkpointing": "full"}, recomputed.NAME),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_compiled_block_with_the_optimizer_in_backward_is_the_trace_s_peak(
    models: dict[str, str], case: str
) -> None:
    name, extra, moment = CASES[case]
    cfg = _cfg(models[name], **extra)
    est = estimate(cfg)
    traced = trace_step(cfg)
    peak = max(est.moments, key=lambda m: m.bytes)
    assert peak.name == moment, peak
    assert est.per_gpu_bytes == traced.peak_bytes, (est.per_gpu_bytes, traced.peak_bytes)


@pytest.mark.parametrize("seq", [16, 32])
def test_few_tokens_the_hooks_step_beside_the_block_s_gradients(
    models: dict[str, str], seq: int
) -> None:
    # few tokens: the block's saved tensors are small beside its weights' gradients, and the
    # peak is the first parameter stepped once the graph returned them all. Which parameter the
    # engine steps first is its ready queue's order among equal AccumulateGrad nodes: the
    # estimate takes the largest block matrix's scratch beside all of them, a bound at most
    # that scratch above (+65,536 B at 16 tokens, +23,808 B at 32)
    cfg = _cfg(models["llama"], seq=seq, batch=1)
    est = estimate(cfg)
    traced = trace_step(cfg)
    peak = max(est.moments, key=lambda m: m.bytes)
    assert peak.name == compiled_backward.NAME, peak
    assert "its graph returned" in peak.calculation
    assert 0 <= est.per_gpu_bytes - traced.peak_bytes <= 65_536, (
        est.per_gpu_bytes,
        traced.peak_bytes,
    )
