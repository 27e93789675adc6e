"""FSDP2 under full activation checkpointing: a block recomputed going back (torch
``utils/checkpoint.py``'s non-reentrant checkpoint reruns its forward after FSDP2's
``pre_backward`` unsharded it and prefetched the block below), beside the block above's
reduce-scatter input (``FSDPParamGroup.post_backward``) and the sharded gradients of the blocks
above, while the blocks below keep only their checkpointed inputs. The estimate counted the
gather moments for blocks that keep their saved tensors alone and read 0.88-0.92 of the trace
on every kind (wide toys: h 256, f 1024, V 256; mixed FSDP 2, seq 64, SGD). Llama's kind is
equal to the byte now, GPT-2's and GPT-NeoX's a bound within 3 %
(profiling.estimate.fsdp_block_gather)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import fsdp_block_gather as gather
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("transformers", reason="the hf extra is not installed")

WIDE = {
    "vocab_size": 256, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512,
}  # fmt: skip
KINDS = {
    "llama": {"model_type": "llama", "num_key_value_heads": 2, "tie_word_embeddings": True},
    "gpt2": {"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_positions": 512,
             "n_inner": 1024},
    "gpt_neox": {"model_type": "gpt_neox", "rotary_pct": 0.25},
    "bloom": {"model_type": "bloom", "n_head": 4},
    "falcon-7b": {"model_type": "falcon"},
    "phi": {"model_type": "phi", "partial_rotary_factor": 0.5},
}  # fmt: skip


def _cfg(
    tmp_path: Path, kind: str, precision: str, layers: int = 2, **extra: object
) -> TrainingConfig:
    path = tmp_path / "config.json"
    shape = {**WIDE, **KINDS[kind], "num_hidden_layers": layers}
    if "n_head" in shape:  # GPT-2's and BLOOM's own name
        shape["n_layer"] = layers
    path.write_text(json.dumps(shape), encoding="utf-8")
    values = {
        "model": f"hf:{path}",
        "seq": 64,
        "batch": 1,
        "precision": precision,
        "fsdp": True,
        "gpus": 2,
        "optimizer": "sgd",
        "checkpointing": "full",
        **extra,
    }
    return TrainingConfig.model_validate(values)


# (kind, precision, blocks, extra): the old ratio in the comment; equal to the byte now
EQUAL = [
    ("llama", "mixed", 2, {}),  # 0.883, block 0's input norm going back
    ("llama", "bf16", 2, {}),  # 0.968
    ("llama", "bf16", 2, {"batch": 2}),  # 0.935, block 0's MLP going back
    ("llama", "mixed", 4, {"gpus": 4}),  # block 1's MLP going back
    ("llama", "mixed", 2, {"attention": "eager"}),  # its 4-D mask in every checkpoint
]


@pytest.mark.parametrize(("kind", "precision", "layers", "extra"), EQUAL)
def test_a_recomputed_llama_block_going_back_is_the_trace(
    tmp_path: Path, kind: str, precision: str, layers: int, extra: dict[str, object]
) -> None:
    cfg = _cfg(tmp_path, kind, precision, layers, **extra)
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment in (gather.NORM, gather.MLP)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.moments, traced.by_category)


# (kind, precision, the bound's ceiling): the old ratio in the comment
BOUND = [
    ("gpt2", "mixed", 1.03),  # 0.919
    ("gpt_neox", "mixed", 1.02),  # 0.886
    ("bloom", "mixed", 1.02),  # 0.893
    ("falcon-7b", "mixed", 1.01),  # 0.898
    ("phi", "bf16", 1.02),  # 0.986
    ("llama", "amp-bf16", 1.02),  # 0.977 (0.993 before gate's moment)
    ("llama", "fp32", 1.01),  # 0.986
]


@pytest.mark.parametrize(("kind", "precision", "ceiling"), BOUND)
def test_other_kinds_and_precisions_are_a_bound_above_the_trace(
    tmp_path: Path, kind: str, precision: str, ceiling: float
) -> None:
    cfg = _cfg(tmp_path, kind, precision)
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.peak_bytes <= est.per_gpu_bytes <= ceiling * traced.peak_bytes, (
        est.peak_moment, est.per_gpu_bytes, traced.peak_bytes)  # fmt: skip
