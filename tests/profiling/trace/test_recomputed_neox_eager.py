"""A fully checkpointed GPT-NeoX-kind block with eager attention, recomputed in backward: its
attention goes back after its MLP, softmax's backward holding two s² gradients beside the
recomputed probabilities (transformers' eager_attention_forward). The estimate's bound stopped
at the MLP's gradients: tiny Falcon-40B (V 512, h 64, f 160, 2 blocks, 4 heads, 2 key/value
heads) fp32 seq 128 read 0.923 of the trace (−196,352 B), GPT-NeoX and Falcon-7B at batch 2
0.896-0.897 (D57). Now a bound above the trace (profiling.estimate.recomputed_neox
``_eager_back``: every tensor it counts is one the trace holds in that backward, not all at
once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")

# (kind, batch, precision): the old ratio in the comment
CASES = [
    ("falcon-40b", 1, "fp32"),  # 0.923
    ("gpt_neox", 2, "fp32"),  # 0.896
    ("falcon-7b", 2, "fp32"),  # 0.897
    ("gpt_neox", 1, "bf16"),  # 0.908
]


@pytest.mark.parametrize(("kind", "batch", "precision"), CASES)
def test_a_recomputed_blocks_eager_attention_going_back_is_bounded(
    tmp_path: Path, kind: str, batch: int, precision: str
) -> None:
    cfg = TrainingConfig(model=neox_spec(tmp_path, kind), seq=128, batch=batch,
                         precision=precision, attention="eager", checkpointing="full",
                         optimizer="sgd")  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    # the stated bound: never below; 1.02-1.05 above in fp32, 1.12 in bf16 (the s² gradients
    # counted in fp32) on these toys
    assert traced.peak_bytes <= est.per_gpu_bytes <= 1.13 * traced.peak_bytes, est.moments
