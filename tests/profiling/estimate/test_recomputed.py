"""A compiled, fully checkpointed block recomputed in backward (profiling.estimate.recomputed),
moment by moment against the trace: the estimate's bytes while the last, the second and the
first block's backward run, each beside the trace's highest while that block's backward ran
(the tracker's per-block segments).

The estimate's end of forward leaves out a few bytes the trace holds through the step (RoPE's
inverse frequencies and a few scalars; the token ids and labels are counted: step_inputs):
every moment here is short of the trace by exactly that, and by nothing else (the loss's
4-byte value apart)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import recomputed
from profiling.estimate.compiled_backward import loss_scalars
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

PREFIX = "HFCausalLM.model.model.layers."  # transformers' Llama as the trace builds it


def _model(tmp: Any, name: str, **config: object) -> str:
    path = tmp.mktemp(name) / "config.json"
    base = {
        "model_type": "llama", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "max_position_embeddings": 512, "tie_word_embeddings": False,
    }  # fmt: skip
    path.write_text(json.dumps({**base, **config}), encoding="utf-8")
    return f"hf:{path}"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    return {
        "three": _model(tmp_path_factory, "three", vocab_size=8192, num_hidden_layers=3),
        "two": _model(tmp_path_factory, "two"),
    }


CASES = {
    # torchtune's kind: a compiled chunked loss keeping 8 chunks' bf16 logits (8 MB here), which
    # the old bound still counted while the blocks were recomputed
    "lora, compiled chunked loss": ("three", {"loss": "chunked", "seq": 256}),
    # torchao's NF4 base: the dequantization is inside the compiled graphs walked
    "qlora nf4, compiled chunked loss": (
        "two",
        {"loss": "chunked", "seq": 64, "qlora": True, "torchao_nf4": True},
    ),
    "lora, reference loss": ("three", {"seq": 128}),
}


def _cfg(model: str, **extra: object) -> TrainingConfig:
    values: dict[str, object] = {
        "model": model, "batch": 2, "precision": "bf16", "target": "cuda", "lora_rank": 8,
        "lora_targets": ["q", "v", "o", "gate", "up", "down"], "compile": True,
        "checkpointing": "full", "foreach": False,
    }  # fmt: skip
    return TrainingConfig.model_validate({**values, **extra})


@pytest.mark.parametrize("case", list(CASES))
def test_each_recomputed_block_s_backward_is_the_trace_s(models: dict[str, str], case: str) -> None:
    name, extra = CASES[case]
    cfg = _cfg(models[name], **extra)
    est = estimate(cfg)
    held = est.category_bytes("inputs") + est.category_bytes("buffers")  # as memory.py holds them
    blocks = recomputed.by_block(est.components, cfg, _shape(cfg), held)
    assert blocks, "the moment is modelled for compiled, checkpointed LoRA on Llama's block"
    seen: dict[str, Any] = {}

    def observe(tracker: Any) -> None:
        tracker.block_prefix, seen["tracker"] = PREFIX, tracker

    traced = trace_step(cfg, observe=observe, block_scaling=False)
    segments = seen["tracker"].segments
    moments = {m.name: m.bytes for m in est.moments}
    # what the estimate leaves out of the whole step (a few bytes), read at the end of forward
    gap = traced.phases["after_forward"]["total"] - moments["end of forward"]
    assert 0 <= gap < 512
    # less the loss's scalars the loop holds, counted at these moments where the loss's tape
    # leaves them out (the chunked losses: estimate.compiled_backward.loss_scalars)
    gap -= loss_scalars(est.components)
    for i, (value, _) in blocks.items():
        got = segments[f"steady-state step/backward|{PREFIX}{i}"]["Total"]
        assert got - value == pytest.approx(gap, abs=8), (i, got, value)
    # the step's moment is the highest of them, and the old bound (the end of forward and a
    # block's kept tensors, the loss's among them) is gone
    assert moments[recomputed.NAME] == round(max(v for v, _ in blocks.values()))
    # (the peak: another moment, within 2 KB either way now that the token ids, the labels and
    # transformers' position ids are counted)
    assert abs(est.per_gpu_bytes - traced.peak_bytes) <= 2_048


def _shape(cfg: TrainingConfig) -> dict[str, Any]:
    from profiling.estimate.shape import shape_of

    return shape_of(cfg)


def test_eager_and_unmodelled_kinds_keep_the_bound(models: dict[str, str]) -> None:
    # eager blocks, or an adapted LM head: the end of forward and one block's activations
    for extra in ({"compile": False}, {"lora_targets": ["q", "v", "lm_head"]}):
        cfg = _cfg(models["three"], seq=128, **extra)
        est = estimate(cfg)
        assert not recomputed.by_block(est.components, cfg, _shape(cfg), 0.0)
        assert "one layer's activations" in next(
            m.calculation for m in est.moments if m.name == recomputed.NAME
        )
