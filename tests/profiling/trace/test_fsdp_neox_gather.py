"""FSDP2's backward of GPT-NeoX's kind (GPT-NeoX, Phi, Falcon, BLOOM) below its top block: the
block above has gone back and its reduce-scatter input is held while a lower block's all-gather
output is copied out beside its parameters (torch ``_fsdp_param_group.py``
``FSDPParamGroup.post_backward`` / ``pre_backward``), as in Llama's. The estimate had no such
moment for this kind and peaked at "backward, last block": one block's 16-bit gathered weights
below the trace (wide toys, mixed, FSDP 2, seq 64: 0.896-0.901, −1.39 to −1.60 MB); now equal
to the byte (profiling.estimate.fsdp_block_gather)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import fsdp_block_gather as gather
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import WIDE, neox_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")

# (kind, precision, GPUs): the old ratio in the comment
CASES = [
    ("gpt_neox", "mixed", 2),  # 0.900
    ("bloom", "mixed", 2),  # 0.897
    ("falcon-7b", "mixed", 2),  # 0.896
    ("phi", "bf16", 4),
]


@pytest.mark.parametrize(("kind", "precision", "gpus"), CASES)
def test_a_lower_blocks_gather_holds_the_peak(
    tmp_path: Path, kind: str, precision: str, gpus: int
) -> None:
    cfg = TrainingConfig(model=neox_spec(tmp_path, kind, WIDE), seq=64, batch=1,
                         precision=precision, fsdp=True, gpus=gpus,
                         optimizer="sgd")  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.peak_moment == gather.GATHER
    assert est.per_gpu_bytes == traced.peak_bytes, (est.moments, traced.by_category)
