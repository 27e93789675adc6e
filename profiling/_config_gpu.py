"""The GPU a configuration is judged against: ``--gpu``'s datasheet entry and the memory to
judge by (``TrainingConfig.gpu_spec``, ``gpu_mem_bytes``). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profiling.gpus import GpuSpec

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module: typed Any here
TrainingConfig = Any


def gpu_spec(cfg: TrainingConfig) -> GpuSpec | None:
    if cfg.gpu is None:
        return None
    from profiling.gpus import GPUS

    return GPUS[cfg.gpu]


def gpu_mem_bytes(cfg: TrainingConfig) -> int | None:
    """The GPU memory to judge against: --gpu-mem, else the --gpu's datasheet memory."""
    if cfg.gpu_mem is not None:
        return int(cfg.gpu_mem * 1e9)
    spec = gpu_spec(cfg)
    return int(spec.memory_gb * 1e9) if spec is not None else None


__all__ = ["gpu_mem_bytes", "gpu_spec"]
