"""What one rank runs: the one-GPU step, or a sharded one. No torch here.

Plain data parallelism (``--gpus N``, N > 1, nothing sharded) is torch's
``DistributedDataParallel`` with ``gradient_as_bucket_view=False``: each rank runs the forward,
the backward (checkpoints and recomputation included) and the optimizer step of one GPU on its
own micro-batch, ``.grad`` made as on one GPU; the Reducer's only addition is its buckets
(torch 2.13 ``torch/nn/parallel/distributed.py`` ``_ddp_init_helper``, ``c10d/reducer.cpp``
``mark_variable_ready_dense``/``copy_bucket_to_grad``), a line of their own
(``profiling.estimate.ddp``) that ``step_moments`` adds to every moment. So a moment modelled
for one GPU holds on every DDP rank too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_ddp import runs_ddp

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def is_ddp(cfg: TrainingConfig) -> bool:
    """Whether the step runs under torch's DistributedDataParallel: N > 1 GPUs, no sharding
    (``_config_ddp.runs_ddp``, which the recipes read too)."""
    return runs_ddp(cfg)


def one_gpu_step(cfg: TrainingConfig) -> bool:
    """Whether each rank runs the one-GPU step (one GPU, or DDP beside its buckets)."""
    return cfg.gpus == 1 or is_ddp(cfg)


__all__ = ["is_ddp", "one_gpu_step"]
