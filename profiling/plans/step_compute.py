"""A plan's compute per GPU per step: the FLOPs with the pipeline's bubble and their seconds at
the GPU's peak × MFU (``profiling.estimate.throughput``, the one throughput model). Apart from
``fit_plans`` so that ``plans.report``, which ``fit_plans`` calls for each rank's nvidia-smi,
can time the communication against it without importing ``fit_plans`` back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.config import TrainingConfig

if TYPE_CHECKING:
    from profiling.estimate.step_time import StepTime


def compute_time(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[float, float | None]:
    """(FLOPs per GPU per step with the pipeline's bubble, their seconds at the GPU's peak ×
    MFU, or None without --gpu)."""
    from profiling.estimate.throughput import flops_per_gpu
    from profiling.estimate.time import step_flops

    counted = step_flops(cfg, shape)
    per_gpu = flops_per_gpu(cfg, (counted[0] + counted[1]) if counted else 0.0)
    spec = cfg.gpu_spec()
    if spec is None or not per_gpu:
        return per_gpu, None
    return per_gpu, per_gpu / (spec.peak_flops(cfg.precision != "fp32") * cfg.mfu)


def plan_time(
    cfg: TrainingConfig, shape: dict[str, Any], params: int | None = None
) -> StepTime | None:
    """The plan's step time and tokens/s on ``--gpu`` (``estimate.throughput.job_time``: the
    bubble, the optimizer step, the communication compute does not hide), None without."""
    from profiling.estimate.throughput import job_time
    from profiling.estimate.time import step_flops

    counted = step_flops(cfg, shape)
    if counted is None:
        return None
    return job_time(cfg, shape, counted[0] + counted[1], params)


__all__ = ["compute_time", "plan_time"]
