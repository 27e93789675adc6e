"""A sharded LoRA step the trace refuses (DoRA under FSDP, QLoRA or LoRA on FSDP1) is
answered by the closed form alone: the estimate says so in a note, with why (it said nothing)."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("peft", reason="the lora extra is not installed")


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"fsdp": True, "qlora": True, "fsdp_flat": True}, "QLoRA"),
        ({"fsdp": True, "dora": True}, "DoRA"),
        ({"fsdp": True, "fsdp_flat": True}, "FSDP1"),
    ],
)
def test_a_sharded_lora_step_the_trace_refuses_is_said_unchecked(
    extra: dict[str, object], why: str
) -> None:
    cfg = TrainingConfig.model_validate({
        "model": "tiny-llama", "seq": 16, "batch": 1, "precision": "bf16", "gpus": 2,
        "lora_rank": 8, "lora_targets": ["q", "v"], **extra,
    })  # fmt: skip
    with pytest.raises(ProfilingError):
        trace_step(cfg)
    notes = [n for n in estimate(cfg).notes if n.startswith("unchecked:")]
    assert len(notes) == 1 and why in notes[0], estimate(cfg).notes


@pytest.mark.parametrize("extra", [{}, {"zero": 2}, {"qlora": True}, {"qlora": True, "zero": 2}])
def test_lora_under_fsdp2_which_the_trace_runs_is_not_said_unchecked(
    extra: dict[str, object],
) -> None:
    cfg = TrainingConfig.model_validate({
        "model": "tiny-llama", "seq": 16, "batch": 1, "precision": "bf16", "gpus": 2,
        "fsdp": True, "lora_rank": 8, "lora_targets": ["q", "v"], **extra,
    })  # fmt: skip
    assert not [n for n in estimate(cfg).notes if n.startswith("unchecked:")]
