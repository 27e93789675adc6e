"""The block-scaled trace equals the full trace, byte for byte, in every number it reports.

A reference model's blocks are identical, so the trace runs the loop with 3, 4 and 5 blocks
and extrapolates (``profiling.trace.scaling``). Here the same configurations are traced both ways
on a 7-block model and every field is compared: peaks, categories at the peak, phase peaks,
first-step peak, phases, what stays after the step, the module table (three levels deep) and
the FLOPs.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from profiling.models.workloads import WORKLOADS
from profiling.trace.scaling import NotAffine, extrapolate
from profiling.trace.step import TraceConfig, trace_step


@pytest.fixture
def deep_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """7-block versions of the toy models (test data: the shapes of the reference ones)."""
    for name in ("tiny-llama", "tiny-gpt2"):
        deep = WORKLOADS[name].model_copy(update={"name": f"deep-{name}", "layers": 7})
        monkeypatch.setitem(WORKLOADS, deep.name, deep)


CASES = {
    "llama-fp32-foreach": {"model": "deep-tiny-llama"},
    "gpt2-amp-bf16-tied": {"model": "deep-tiny-gpt2", "precision": "amp-bf16"},
    "llama-mixed": {"model": "deep-tiny-llama", "precision": "mixed"},
    "llama-mixed-fp32-grads": {
        "model": "deep-tiny-llama",
        "precision": "mixed",
        "fp32_grads": True,
    },
    "llama-pure-bf16": {"model": "deep-tiny-llama", "precision": "bf16"},
    "llama-checkpointed": {"model": "deep-tiny-llama", "checkpointing": True},
    "gpt2-sgd-loop-grads-kept": {
        "model": "deep-tiny-gpt2",
        "optimizer": "sgd",
        "foreach": False,
        "grads_kept": True,
    },
    "llama-forward-peak": {"model": "deep-tiny-llama", "batch": 16, "seq": 128},
    "gpt2-eager-dropout": {"model": "deep-tiny-gpt2", "attention": "eager", "dropout": 0.1},
    # peft's lora_dropout at p = 0 is an nn.Identity that torch's ModTracker leaves among the
    # parents in backward: block scaling missed and traced every block (llama-7b LoRA fit)
    "llama-lora-checkpointed": {
        "model": "deep-tiny-llama",
        "precision": "bf16",
        "lora_rank": 4,
        "checkpointing": "full",
    },
    "llama-lora-all-linear-mixed": {
        "model": "deep-tiny-llama",
        "precision": "mixed",
        "lora_rank": 4,
        "lora_targets": ["all-linear"],
    },
    "llama-qlora-checkpointed": {
        "model": "deep-tiny-llama",
        "precision": "bf16",
        "lora_rank": 4,
        "qlora": True,
        "checkpointing": "full",
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_block_scaled_trace_equals_full_trace(deep_models, name: str) -> None:
    cfg = TraceConfig(**{"batch": 2, "seq": 16, **CASES[name]})
    scaled = trace_step(cfg, module_depth=3, block_scaling=True)
    full = trace_step(cfg, module_depth=3, block_scaling=False)
    assert any("block-scaled" in n for n in scaled.notes), scaled.notes
    assert not any("block-scaled" in n for n in full.notes)
    assert len([m for m in full.by_module if ".layers." in m or ".h." in m]) >= 7 * 3
    skip = {"wall_seconds", "notes"}
    assert scaled.model_dump(exclude=skip) == full.model_dump(exclude=skip)


@pytest.mark.parametrize("ranks", [2, 4])
def test_fsdp_scaled_or_traced_in_full_always_exact(deep_models, ranks: int) -> None:
    # FSDP prefetches the next block's parameters and finishes the previous block's
    # reduce-scatter inside a block: its stretches may or may not scale (it has depended on the
    # rank count and on what DTensor had cached), so the 5-block check decides. Either way the
    # result is the full trace's, and a note says which way it went.
    cfg = TraceConfig(model="deep-tiny-llama", batch=2, seq=16, fsdp=True, gpus=ranks)
    r = trace_step(cfg, block_scaling=True)
    scaled = any("block-scaled" in n for n in r.notes)
    assert scaled is not any("every block traced" in n for n in r.notes)
    skip = {"wall_seconds", "notes"}
    assert r.model_dump(exclude=skip) == trace_step(cfg, block_scaling=False).model_dump(
        exclude=skip
    )


def test_a_quantity_that_does_not_scale_is_refused() -> None:
    prefix = "M.blocks."

    def sample(n: int, quirk: int = 0) -> dict:
        named = {"params": {"n": 100 + 10 * n}}
        for i in range(n):
            named[f"module|{prefix}{i}"] = {"peak": 1000 + 5 * n + 3 * i}
        named[f"module|{prefix}{n - 1}"]["peak"] += quirk
        return named

    exact = {n: sample(n) for n in (3, 4, 5)}
    out = extrapolate(exact, 32, prefix)
    assert out["params"] == {"n": 420}
    assert out[f"module|{prefix}17"] == {"peak": 1000 + 5 * 32 + 3 * 17}
    bent = {3: sample(3), 4: sample(4), 5: sample(5, quirk=1)}
    with pytest.raises(NotAffine):
        extrapolate(bent, 32, prefix)
