"""torch's DistributedDataParallel as the frameworks configure it (``--gpus N`` without
sharding): the settings that move memory, ``find_unused_parameters`` and
``gradient_as_bucket_view`` (stdlib and pydantic only, as ``profiling.config`` imports it).

torch 2.13 ``torch/nn/parallel/distributed.py``: with ``find_unused_parameters=True`` (and no
static graph) ``_pre_forward`` never rebuilds the buckets (``_BucketCapacityConfig``: the
[1 MiB, cap] sizes from the start: the same bytes), the Reducer keeps two int32 maps of the
parameters used (``local_used_map_`` on the host, pinned, and ``local_used_map_dev_`` on the
GPU: ``c10d/reducer.cpp``), and ``_post_forward`` runs every output through ``_DDPSink``,
whose forward clones each tensor (``_ddp_sink_clone``) before the wrapped module's outputs are
let go. With ``gradient_as_bucket_view=True`` ``mark_variable_ready_dense`` copies a ready
gradient into its bucket and points ``.grad`` at the bucket's view (``grad = bucket_view``),
letting the one autograd made go: the buckets are the gradients, not a copy beside them. The
Hugging Face Trainer passes find_unused_parameters True for a ``PreTrainedModel`` unless
gradient checkpointing is on or ``ddp_find_unused_parameters`` says otherwise
(transformers ``Trainer._build_accelerator_args``); accelerate, Lightning and torch default both
to False, and no file the recipes read sets gradient_as_bucket_view (accelerate's
``DistributedDataParallelKwargs`` and Lightning's ``DDPStrategy`` take it in code).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

DDP_FIND_UNUSED_FIELD: Any = Field(
    False,
    description="DDP (--gpus N without sharding) with find_unused_parameters=True, as the "
    "Hugging Face Trainer wraps a transformers model without gradient checkpointing: every "
    "output cloned at forward's end (_DDPSink) and the Reducer's map of used parameters.",
)

DDP_BUCKET_VIEW_FIELD: Any = Field(
    False,
    description="DDP (--gpus N without sharding) with gradient_as_bucket_view=True, as "
    "accelerate's DistributedDataParallelKwargs or Lightning's DDPStrategy may set it: each "
    ".grad becomes a view of its bucket once ready, so the buckets hold the gradients instead "
    "of a copy beside them.",
)


def runs_ddp(cfg: Any) -> bool:
    """Whether ``cfg`` (a ``TrainingConfig``) runs under torch's DistributedDataParallel: N > 1
    GPUs, nothing sharded (no ZeRO, FSDP, DeepSpeed or parallel plan)."""
    sharding = cfg.zero or cfg.fsdp or cfg.deepspeed or cfg.is_plan
    return cfg.gpus > 1 and not sharding


__all__ = ["DDP_BUCKET_VIEW_FIELD", "DDP_FIND_UNUSED_FIELD", "runs_ddp"]
