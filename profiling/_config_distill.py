"""torchtune's knowledge distillation step (``--kd-teacher MODEL``): its field and what it is
modelled with (stdlib and pydantic only, as ``profiling.config`` imports it).

torchtune's KD recipes (recipes/knowledge_distillation_single_device.py and _distributed.py at
bd2a0fc): ``_setup_teacher_model`` builds the teacher in the student's dtype
(``training.set_default_dtype(self._dtype)``, ``model.eval()``); ``_loss_step`` runs the student
(chunked logits: ``set_num_output_chunks`` of ``CEWithChunkedOutputLoss``), the teacher under
``torch.no_grad()``, ``ForwardKLWithChunkedOutputLoss`` on both chunk lists, then the
cross-entropy on the student's chunks, and ``del``s both logits; the loop backwards
``(1 − kd_ratio)·class_loss + kd_ratio·kd_loss``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from profiling.errors import ConfigError

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module: typed Any here
TrainingConfig = Any

KD_TEACHER_FIELD: Any = Field(
    None,
    description="torchtune's knowledge distillation step with this teacher (a model as --model "
    "names one): the frozen teacher in the student's dtype, its forward under no_grad, "
    "ForwardKLWithChunkedOutputLoss on both models' chunked logits beside the chunked "
    "cross-entropy (needs --loss chunked, as the recipe asserts CEWithChunkedOutputLoss).",
)


def check_distill(cfg: TrainingConfig) -> None:
    """One ConfigError sentence for what ``--kd-teacher`` is not modelled with (yet)."""
    if cfg.kd_teacher is None:
        return
    other = (
        "a --loss other than chunked (the recipe asserts CEWithChunkedOutputLoss; linear "
        "losses raise)" if cfg.loss != "chunked"
        else "--dpo" if cfg.dpo
        else "--compile" if cfg.compile
        else "--gpus, --zero, --fsdp, --tp or --deepspeed (one GPU only)"
        if cfg.gpus > 1 or cfg.zero or cfg.fsdp or cfg.tp > 1 or cfg.deepspeed
        else "autocast or --precision mixed (torchtune trains in bf16 or fp32)"
        if cfg.autocast or cfg.precision == "mixed"
        else "--optimizer-in-bwd" if cfg.optimizer_in_bwd
        else "--activation-offload" if cfg.activation_offload
        else "--dora" if cfg.dora
        else None
    )  # fmt: skip
    if other is not None:
        raise ConfigError(f"--kd-teacher is not modelled with {other} yet", "kd_teacher")


__all__ = ["KD_TEACHER_FIELD", "check_distill"]
