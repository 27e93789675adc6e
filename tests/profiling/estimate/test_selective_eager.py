"""``--checkpointing selective`` with eager attention (#31): the last block's attention core,
recomputed in backward, holds its fp32 probabilities beside softmax's two fp32 s² gradients
(``profiling.estimate.selective_eager``). The estimate's peak was the loss's backward: 0.60 of
the traced step on transformers' Llama at bf16 512 × 2 (23.0 MB against 38.1 MB), 0.64 mixed,
0.75 fp32, 0.68 amp-bf16; transformers' GPT-2 0.96 bf16. Now equal to the trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the hf extra is not installed")

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.selective_eager import NAME
from profiling.trace.step import trace_step

_LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 352,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512,
}  # fmt: skip

# (precision, batch, seq, key/value heads); the old estimate's ratio to the trace in the comment
ROWS = {
    "bf16 2 × 512": ("bf16", 2, 512, 2),  # 0.604
    "fp32 1 × 256": ("fp32", 1, 256, 2),  # 0.966
    "mixed 2 × 256 no grouped heads": ("mixed", 2, 256, 4),  # 0.922
    "amp-bf16 1 × 256": ("amp-bf16", 1, 256, 2),  # 0.940
}


def _config(
    tmp_path: Path, precision: str, batch: int, seq: int, kv: int, attention: str
) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_LLAMA, "num_key_value_heads": kv}), encoding="utf-8")
    return TrainingConfig(model=f"hf:{path}", precision=precision, batch=batch, seq=seq,
                          attention=attention, checkpointing="selective")  # fmt: skip


@pytest.mark.parametrize(("precision", "batch", "seq", "kv"), list(ROWS.values()), ids=list(ROWS))
def test_the_recomputed_eager_core_going_back_is_the_traced_peak(
    tmp_path: Path, precision: str, batch: int, seq: int, kv: int
) -> None:
    cfg = _config(tmp_path, precision, batch, seq, kv, "eager")
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.peak_moment == NAME
    assert traced.peak_phase == "backward"
    assert est.per_gpu_bytes == traced.peak_bytes


_GPT2 = {"model_type": "gpt2", "vocab_size": 512, "n_embd": 128, "n_layer": 2, "n_head": 4,
         "n_positions": 512}  # fmt: skip


@pytest.mark.parametrize(
    ("precision", "batch"),
    [("bf16", 2), ("mixed", 1)],  # 0.956 (−1,198,592 B), 0.971
)
def test_transformers_gpt2_recomputed_core_in_its_compute_dtype(
    tmp_path: Path, precision: str, batch: int
) -> None:
    """GPT-2's eager core runs softmax in the compute dtype: three s² tensors of c bytes."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_GPT2), encoding="utf-8")
    cfg = TrainingConfig(model=f"hf:{path}", precision=precision, batch=batch, seq=512,
                         attention="eager", checkpointing="selective")  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.peak_moment == NAME
    assert est.per_gpu_bytes == traced.peak_bytes


def test_sdpa_recomputes_no_s_squared_tensor(tmp_path: Path) -> None:
    """Under SDPA the fused core keeps no probabilities: no such moment, still never below."""
    cfg = _config(tmp_path, "bf16", 1, 256, 2, "sdpa")
    est, traced = estimate(cfg), trace_step(cfg)
    assert NAME not in [m.name for m in est.moments]
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes * 1.05
