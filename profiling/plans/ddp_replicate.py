"""A plan's DDP alone (``--dp-replicate N`` without ``--dp-shard``, no other degree):
torchtitan's ``apply_ddp`` (torchtitan/models/llama3/infra/parallelize.py) runs
``torch.distributed._composable.replicate(model, device_mesh=..., bucket_cap_mb=100)``, which
builds a real ``DistributedDataParallel`` (``_composable/replicate.py``): the same Reducer and
buckets as ``--gpus N`` without a plan (``profiling.trace.ddp``), with a 100 MiB cap, the first
bucket's too (an explicit ``bucket_cap_mb``). The closed form counts them in its base
(``kept_form.stage_states``). Imports torch (through the trace's module) where it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_plan import ddp_alone
from profiling.config import TrainingConfig

if TYPE_CHECKING:
    from torch import nn

    from profiling.trace.ddp import Buckets
    from profiling.trace.tracker import StepTracker

TITAN_CAP_BYTES = 100 * 1024 * 1024  # torchtitan's apply_ddp: bucket_cap_mb=100


def replicate_buckets(
    cfg: TrainingConfig, model: nn.Module, tracker: StepTracker
) -> Buckets | None:
    """The Reducer's buckets made at the wrap (one for the first step), or None but under DDP
    alone; ``rebuild()`` them before the second step, as its second forward does."""
    if not ddp_alone(cfg):
        return None
    from profiling.trace.ddp import Buckets

    return Buckets(model, tracker, cap=TITAN_CAP_BYTES)


__all__ = ["TITAN_CAP_BYTES", "replicate_buckets"]
