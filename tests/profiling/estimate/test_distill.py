"""torchtune's knowledge distillation step (--kd-teacher): the estimate equals the trace of the
same step on fake tensors, or is a stated bound above it.

The trace runs knowledge_distillation_single_device.py's _loss_step (profiling.trace.distill,
profiling.models.kd_loss: the student's chunked logits, the frozen teacher's under no_grad,
ForwardKLWithChunkedOutputLoss, then CEWithChunkedOutputLoss); the estimate writes it as a loss
tape (profiling.estimate.distill). Before, KD configs were refused (50c0bb5) and --kd-teacher
did not exist. The bounds: the KL loss's 0-dim tensors (8 B × (n + 4)) and, where the teacher's
blocks outweigh its logits, a teacher block (as DPO's reference's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.distill import BOUND
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import LLAMA

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# a wider, deeper, untied teacher of the student's vocabulary
TEACHER = {**LLAMA, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 3,
           "tie_word_embeddings": False}  # fmt: skip
SCALARS = 8 * (8 + 4)  # the KL loss's 0-dim tensors' bound, 8 chunks
CASES: list[dict[str, Any]] = [
    {"precision": "bf16", "lora_rank": 8},
    {"precision": "bf16"},
    {"precision": "bf16", "lora_rank": 8, "loss_chunks": 4},
    {"precision": "fp32", "lora_rank": 8, "batch": 1},
    # neighbours: full checkpointing, QLoRA, the CUDA target, fp32 full training (1.019)
    {"precision": "bf16", "lora_rank": 8, "checkpointing": "full"},
    {"precision": "bf16", "lora_rank": 8, "qlora": True},
    {"precision": "bf16", "lora_rank": 8, "target": "cuda"},
    {"precision": "fp32"},
]


def _config(tmp_path: Path, **kw: Any) -> TrainingConfig:
    for name, shape in (("student", LLAMA), ("teacher", TEACHER)):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "config.json").write_text(json.dumps(shape), encoding="utf-8")
    base = {"model": f"hf:{tmp_path / 'student'}", "kd_teacher": f"hf:{tmp_path / 'teacher'}",
            "seq": 32, "batch": 2, "target": "cpu", "loss": "chunked"}  # fmt: skip
    return TrainingConfig(**{**base, **kw})


@pytest.mark.parametrize("kw", CASES, ids=[json.dumps(c) for c in CASES])
def test_kd_estimate_is_its_trace_or_a_stated_bound(tmp_path: Path, kw: dict[str, Any]) -> None:
    """Before: no --kd-teacher (KD configs refused). Now: every phase's peak within the KL
    loss's scalars' bound above the trace, or the teacher block's bound (fp32 batch 1: 1.014)."""
    cfg = _config(tmp_path, **kw)
    traced, est = trace_step(cfg), estimate(cfg)
    moments = {m.name: m.bytes for m in est.moments}
    assert est.per_gpu_bytes >= traced.peak_bytes
    if est.peak_moment == BOUND:
        assert est.per_gpu_bytes <= 1.03 * traced.peak_bytes
    else:
        assert est.per_gpu_bytes <= traced.peak_bytes + SCALARS
    for moment, phase in (("loss forward", "forward"), ("loss backward", "backward")):
        assert 0 <= moments[moment] - traced.phase_peaks[phase] <= SCALARS, moment
    assert moments["optimizer step"] == traced.phase_peaks["optimizer_step"]


def test_the_teacher_and_its_logits_are_counted(tmp_path: Path) -> None:
    """The teacher's weights in the student's dtype; the KL loss keeps the teacher's fp32
    probabilities, the student's fp32 log-probabilities and the isinf mask, 9 B per logit."""
    kd = estimate(_config(tmp_path, precision="bf16", lora_rank=8))
    sft = estimate(_config(tmp_path, precision="bf16", lora_rank=8, kd_teacher=None))
    teacher = [c for c in kd.components if c.name.startswith("Teacher model: weights")]
    assert len(teacher) == 1 and teacher[0].bytes > 0
    kept = sum(c.bytes for c in kd.components if c.name.startswith("Logits: The teacher's fp32"))
    assert kept == 32 * 2 * 512 * 4
    assert kd.per_gpu_bytes > sft.per_gpu_bytes + teacher[0].bytes


@pytest.mark.parametrize(
    ("kw", "said"),
    [({"loss": "cross-entropy"}, "CEWithChunkedOutputLoss"), ({"fsdp": True, "gpus": 2},
     "one GPU only"), ({"compile": True}, "compile"), ({"precision": "mixed"}, "autocast")],
)  # fmt: skip
def test_what_kd_is_not_modelled_with_is_one_sentence(kw: dict[str, Any], said: str) -> None:
    base = {"model": "hf:llama-3.2-1b", "kd_teacher": "hf:llama-3.1-8b", "seq": 32,
            "loss": "chunked"}  # fmt: skip
    with pytest.raises(ConfigError) as info:
        TrainingConfig(**{**base, **kw})
    assert said in str(info.value) and "kd_teacher is not modelled with" in str(info.value)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("loss", ["cross-entropy", "chunked"])
def test_dpo_beside_kd_is_refused_as_a_pair_first(batch: int, loss: str) -> None:
    # audit7 D77: before, one flag at a time ("an odd --batch", then "--loss", then "--dpo")
    with pytest.raises(ConfigError) as info:
        TrainingConfig(model="hf:llama-3.2-1b", kd_teacher="hf:llama-3.1-8b", dpo=True,
                       seq=32, batch=batch, loss=loss)  # fmt: skip
    assert "dpo and kd_teacher are separate torchtune recipes" in str(info.value)
