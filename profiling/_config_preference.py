"""torchtune's DPO step (``--dpo``): its field and what it is modelled with (stdlib and pydantic
only, as ``profiling.config`` imports it).

torchtune's DPO recipes (recipes/lora_dpo_single_device.py, lora_dpo_distributed.py,
full_dpo_distributed.py at bd2a0fc) run chosen and rejected responses concatenated
(``padded_collate_dpo``: 2 × batch_size rows), the policy's fp32 logits through
``rlhf.get_batch_log_probs`` (a sum of log-probabilities per row), then a reference forward
under ``torch.no_grad()`` — the policy with its adapters off (``disable_adapter``) under LoRA, a
frozen copy of the model (``_setup_reference_model``) without — and ``DPOLoss`` over the four
per-row sums.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from profiling.errors import ConfigError

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module: typed Any here
TrainingConfig = Any

DPO_FIELD: Any = Field(
    False,
    description="torchtune's DPO step: --batch counts rows, chosen and rejected concatenated "
    "(twice the pairs); the policy's per-row log-probabilities, then a reference forward under "
    "no_grad (LoRA: the adapters off, its fp32 logits held to the next step as lora_dpo_*.py "
    "hold them; else a frozen copy of the model, as full_dpo_distributed.py).",
)


def check_dpo(cfg: TrainingConfig) -> None:
    """One ConfigError sentence for what ``--dpo`` is not modelled with (yet)."""
    if not cfg.dpo:
        return
    if cfg.kd_teacher is not None:  # said first: no other flag makes the pair modelled
        raise ConfigError(
            "--dpo and --kd-teacher are separate torchtune recipes (the DPO recipes and "
            "knowledge_distillation_*), not modelled together: give one of them",
            "dpo",
        )
    other = (
        "--loss (DPO's loss is its own)" if cfg.loss != "cross-entropy"
        else "--compile" if cfg.compile
        else "--gpus, --zero, --fsdp, --tp or --deepspeed (one GPU only)"
        if cfg.gpus > 1 or cfg.zero or cfg.fsdp or cfg.tp > 1 or cfg.deepspeed
        else "autocast (--precision amp-*; torchtune trains in bf16)" if cfg.autocast
        else "--optimizer-in-bwd" if cfg.optimizer_in_bwd
        else "--activation-offload" if cfg.activation_offload
        else "--dora" if cfg.dora
        else "an odd --batch (chosen and rejected rows come in pairs)" if cfg.batch % 2
        else None
    )  # fmt: skip
    if other is not None:
        raise ConfigError(f"--dpo is not modelled with {other} yet", "dpo")


__all__ = ["DPO_FIELD", "check_dpo"]
