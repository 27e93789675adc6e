"""Eager LoRA with full checkpointing where the vocabulary is small next to the hidden size:
the peak is a recomputed block's backward, not the loss, and the estimate must not fall below
the trace there (profiling.estimate.recomputed_eager). The earlier bound (the end of forward
and one block's kept tensors) came out 0.86–0.97 of the trace on these configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import recomputed_eager
from profiling.estimate.memory import estimate
from tests.profiling.estimate.recomputed_checks import check_recomputed_bound

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    shapes = {
        # the vocabulary the hidden size's: the loss's logits no larger than a block's tensors
        "v256": {"vocab_size": 256, "hidden_size": 256, "intermediate_size": 512},
        # fewer key/value heads, f ≠ 2h, two blocks, a vocabulary a third of h
        "v128": {"vocab_size": 128, "hidden_size": 384, "intermediate_size": 640,
                 "num_key_value_heads": 2, "num_hidden_layers": 2},
    }  # fmt: skip
    out = {}
    for name, shape in shapes.items():
        path = tmp_path_factory.mktemp(name) / "config.json"
        base = {
            "model_type": "llama", "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 4, "max_position_embeddings": 512,
            "tie_word_embeddings": False,
        }  # fmt: skip
        path.write_text(json.dumps({**base, **shape}), encoding="utf-8")
        out[name] = f"hf:{path}"
    return out


# (model, our blocks or transformers', precision, targets, lora_dropout)
CASES = {
    "transformers, bf16, q,v": ("v256", False, "bf16", "q,v", 0.0),
    "transformers, mixed, all-linear, dropout": ("v256", False, "mixed", "all-linear", 0.1),
    "transformers, fp32, q,v": ("v256", False, "fp32", "q,v", 0.0),
    "transformers, amp-bf16, all-linear": ("v256", False, "amp-bf16", "all-linear", 0.0),
    "ours, amp-bf16, q,v": ("v256", True, "amp-bf16", "q,v", 0.0),
    "ours, bf16, all-linear, dropout": ("v256", True, "bf16", "all-linear", 0.1),
    "transformers, 2 kv heads, mixed, q,v": ("v128", False, "mixed", "q,v", 0.0),
    "ours, 2 kv heads, fp32, all-linear": ("v128", True, "fp32", "all-linear", 0.0),
}


CLOSE = {"transformers, bf16, q,v", "ours, amp-bf16, q,v", "transformers, 2 kv heads, mixed, q,v"}


def _cfg(model: str, precision: str, targets: str, dropout: float) -> TrainingConfig:
    return TrainingConfig(model=model, seq=64, batch=2, precision=precision, lora_rank=8,
                          lora_targets=targets, lora_dropout=dropout,
                          checkpointing="full")  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_recomputed_block_is_never_below_the_trace(models: dict[str, str], case: str) -> None:
    name, ours, precision, targets, dropout = CASES[case]
    cfg = _cfg(models[name], precision, targets, dropout)
    # the peak is a recomputed block's backward, and the bound is above it, not far: within
    # 1 % where attention alone is adapted and the MLP's gradients lead (an h-sized gradient
    # copy, counted twice before, put these 1.4-1.9 % above), 7 % elsewhere (all-linear)
    check_recomputed_bound(cfg, ours, case, most=1.01 if case in CLOSE else 1.07)


def test_large_vocabulary_keeps_the_loss_as_the_peak(models: dict[str, str]) -> None:
    """Where the vocabulary is large the loss's moment leads and the bound changes nothing."""
    cfg = TrainingConfig(model="tiny-llama", seq=64, batch=2, precision="bf16", lora_rank=8,
                         lora_targets="q,v", checkpointing="full", vocab=32000)  # fmt: skip
    est = estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert moments[recomputed_eager.NAME] < est.per_gpu_bytes


def test_not_modelled_where_the_block_is_compiled_or_the_head_adapted() -> None:
    for extra in ({"compile": True}, {"lora_targets": "q,v,lm_head"}, {"checkpointing": "none"}):
        values: dict[str, object] = {"model": "tiny-llama", "seq": 64, "batch": 2,
                                     "lora_rank": 8, "checkpointing": "full", **extra}  # fmt: skip
        cfg = TrainingConfig.model_validate(values)
        assert all(m.name != recomputed_eager.NAME for m in estimate(cfg).moments), extra


WIDE_UNTIED = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": False,
}  # fmt: skip

# --optimizer-in-bwd: (precision, targets, the highest estimate / trace)
IN_BWD = {
    # audit3 D34: the earlier bound (end of forward + one block's kept tensors, no autocast
    # copies of the recomputed block's frozen weights) was 0.90 of the trace (−1,114,576 B)
    "amp-bf16, q": ("amp-bf16", "q", 1.01),
    "amp-fp16, q": ("amp-fp16", "q", 1.01),
    "amp-bf16, all-linear": ("amp-bf16", "all-linear", 1.07),
}


@pytest.mark.parametrize("case", list(IN_BWD))
def test_optimizer_in_backward_keeps_the_recomputed_bound(case: str, tmp_path: Path) -> None:
    """Each adapter stepped as its gradient is made (and that gradient freed) changes nothing
    of the recomputed block's autocast copies and MLP gradients: the bound applies (it keeps
    counting the adapters' gradients, a few KB)."""
    from profiling.trace.step import trace_step

    precision, targets, most = IN_BWD[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(WIDE_UNTIED), encoding="utf-8")
    cfg = TrainingConfig(model=f"hf:{path}", seq=16, batch=1, precision=precision, lora_rank=8,
                         lora_targets=targets, checkpointing="full",
                         optimizer_in_bwd=True)  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert traced.peak_bytes <= est.per_gpu_bytes <= most * traced.peak_bytes, (
        est.peak_moment, est.per_gpu_bytes - traced.peak_bytes,
    )  # fmt: skip
