"""Tokens/s of a training step on the job's GPUs: the one model ``fit`` ranks by and
``estimate`` prints, for data parallelism (DDP, ZeRO-1/2/3, offload) and for a parallel plan
(FSDP × TP × CP × Ulysses × PP) alike.

    FLOPs per GPU = the step's FLOPs / (tp · cp · ulysses · pp) × (1 + the pipeline's bubble)
    step time     = FLOPs per GPU / (peak × MFU) + the optimizer step (its shard: ZeRO, FSDP,
                    TP and the pipeline split it; offloaded, the PCIe transfers and the host's
                    step) + the communication compute does not hide (``estimate.comm``)
    tokens/s      = batch · seq per data-parallel rank × data-parallel ranks / step time
                    (the job's; per GPU: ÷ every GPU of the job)

The pipeline's bubble: 1F1B idles ``(pp − 1)/m`` of a step, interleaved and ZBV ``(pp − 1)/(V·m)``
(Narayanan et al. 2021), ``m`` microbatches, ``V`` stages per rank. Each term is a
``profiling.estimate.step_time`` step, so every number printed shows its formula. No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling._config_plan import dp_degrees, plan_world
from profiling.estimate.step_time import StepTime, optimizer_overheads, step_time

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.comm import Comm


def bubble(cfg: TrainingConfig) -> float:
    """The fraction of a step a pipeline idles (see the module); 0 without one."""
    if cfg.pp == 1:
        return 0.0
    m, v = cfg.microbatches or cfg.batch, cfg.virtual_stages or 1
    return (cfg.pp - 1) / (m * (v if cfg.pp_schedule != "1f1b" else 1))


def model_parallel(cfg: TrainingConfig) -> int:
    """The GPUs one data-parallel rank's step is split over: tp · cp · ulysses · pp."""
    return cfg.tp * cfg.cp * cfg.ulysses * cfg.pp


def flops_per_gpu(cfg: TrainingConfig, total: float) -> float:
    """One GPU's FLOPs of a step whose data-parallel rank runs ``total``, the bubble counted."""
    return total / model_parallel(cfg) * (1 + bubble(cfg))


def optimizer_shards(cfg: TrainingConfig) -> int:
    """How many GPUs share one optimizer step: ZeRO-1 and above over N, and t for TP; a plan's
    FSDP over ``dp_shard · cp · ulysses`` (its flattened ``dp_shard_cp``), its TP and the
    pipeline's stages (each steps its own layers)."""
    if not cfg.is_plan:
        return (cfg.gpus if cfg.zero >= 1 else 1) * cfg.tp
    shard, _ = dp_degrees(cfg)
    return shard * cfg.cp * cfg.ulysses * cfg.tp * cfg.pp


def job_comm(cfg: TrainingConfig, shape: dict[str, Any], params: int | None = None) -> Comm | None:
    """What one GPU sends per step (``estimate.comm``), None on one GPU."""
    if plan_world(cfg) == 1:
        return None
    from profiling.estimate.comm import comm

    return comm(cfg, shape, params)


def job_time(
    cfg: TrainingConfig, shape: dict[str, Any], total: float, params: int | None = None
) -> StepTime | None:
    """The step's time and tokens/s on ``--gpu`` (None without one): ``total`` is the FLOPs of
    one data-parallel rank's step (``estimate.time.step_flops``), ``params`` the model's (a
    plan's own count; else the shape's)."""
    spec = cfg.gpu_spec()
    if spec is None:
        return None
    n = int(params or shape.get("params") or 0)
    trained = shape.get("lora_adapters") if cfg.lora_rank is not None else n
    shards = optimizer_shards(cfg)
    return step_time(
        round(flops_per_gpu(cfg, total)),
        cfg.seq_or_default() * cfg.batch,
        spec,
        cfg.mfu,
        sixteen_bit=cfg.precision != "fp32",
        gpus=cfg.gpus,
        tokens=cfg.tokens,
        tp=model_parallel(cfg),
        overheads=optimizer_overheads(cfg, float(trained or 0), spec, shards),
        comm=job_comm(cfg, shape, params),
        split="TP" if model_parallel(cfg) == cfg.tp else "model-parallel",
    )


def tokens_per_gpu(t: StepTime) -> float:
    """Tokens/s per GPU of the job."""
    return t.tokens_per_second / (t.gpus * t.tp)


__all__ = [
    "bubble", "flops_per_gpu", "job_comm", "job_time", "model_parallel", "optimizer_shards",
    "tokens_per_gpu",
]  # fmt: skip
