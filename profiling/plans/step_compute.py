"""A plan's compute per GPU per step: the FLOPs with the pipeline's bubble and their seconds at
the GPU's peak × MFU. Apart from ``fit_plans`` (which ranks plans by it) so that
``plans.report``, which ``fit_plans`` calls for each rank's nvidia-smi, can time the
communication against it without importing ``fit_plans`` back."""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig


def _bubble(cfg: TrainingConfig) -> float:
    if cfg.pp == 1:
        return 0.0
    m, v = cfg.microbatches or cfg.batch, cfg.virtual_stages or 1
    return (cfg.pp - 1) / (m * (v if cfg.pp_schedule != "1f1b" else 1))


def compute_time(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[float, float | None]:
    """(FLOPs per GPU per step with the pipeline's bubble, their seconds at the GPU's peak ×
    MFU, or None without --gpu)."""
    from profiling.estimate.time import step_flops

    counted = step_flops(cfg, shape)
    flops = (counted[0] + counted[1]) if counted else 0.0
    per_gpu = flops / (cfg.tp * cfg.cp * cfg.ulysses * cfg.pp) * (1 + _bubble(cfg))
    spec = cfg.gpu_spec()
    if spec is None or not per_gpu:
        return per_gpu, None
    return per_gpu, per_gpu / (spec.peak_flops(cfg.precision != "fp32") * cfg.mfu)


__all__ = ["compute_time"]
