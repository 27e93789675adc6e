"""FSDP's gradient accumulation without a reduction per micro-batch, as a ``TrainingConfig``
field.

``accumulate_unsharded`` N: each optimizer step accumulates N micro-batches, and all but the
last run without gradient sync — FSDP1's ``module.no_sync()`` (what Lightning's
``fabric.no_backward_sync`` runs under its FSDPStrategy, so LitGPT's full.py), FSDP2's
``set_requires_gradient_sync(False)``. Each rank keeps every parameter's *unsharded* gradient
(the whole model's, in the parameter dtype; FSDP2 under a MixedPrecisionPolicy with an fp32
reduce dtype keeps it in fp32) from the first micro-batch's backward until the last one's,
which adds its gradients to them and reduce-scatters them into the sharded gradients the
optimizer steps. The parameters are resharded after each backward as usual.

No torch here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from profiling.errors import ConfigError

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module.
TrainingConfig = Any

ACCUMULATE_UNSHARDED_FIELD: Any = Field(
    None,
    ge=2,
    le=10**6,
    description="FSDP: micro-batches per optimizer step accumulated without gradient sync "
    "(FSDP1's no_sync, FSDP2's set_requires_gradient_sync(False)): each rank keeps the "
    "unsharded gradients until the last micro-batch reduce-scatters them.",
)

FSDP_FLAT_FIELD: Any = Field(
    False,
    description="FSDP1 (FullyShardedDataParallel, Lightning's FSDPStrategy) rather than "
    "FSDP2: each wrapped module's parameters are views of one flat parameter, whose gradient "
    "autograd makes by concatenating the views' gradients (the root's: the LM head's and the "
    "embedding's) while the root is still gathered.",
)


def check_accumulation(cfg: TrainingConfig) -> None:
    """One sentence for what accumulating unsharded gradients (or FSDP1's flat parameters)
    cannot go with."""
    if cfg.fsdp_flat and (not (cfg.fsdp and cfg.gpus > 1) or cfg.is_plan or cfg.tp > 1):
        raise ConfigError(
            "--fsdp-flat is FSDP1's flat parameters over --fsdp --gpus N (N > 1), without a "
            "parallel plan or --tp: add --fsdp --gpus N or drop it",
            "fsdp_flat",
        )
    n = cfg.accumulate_unsharded
    if n is None:
        return
    flag = f"--accumulate-unsharded {n}"
    if cfg.is_plan:
        raise ConfigError(
            f"{flag} is FSDP's accumulation over --fsdp --gpus N; a parallel plan (--dp-shard, "
            "--tp with them, --cp, --pp) does not model it yet: drop one",
            "accumulate_unsharded",
        )
    if not (cfg.fsdp and cfg.gpus > 1) or cfg.deepspeed:
        raise ConfigError(
            f"{flag} keeps FSDP's unsharded gradients on each rank: it needs --fsdp --gpus N "
            "(N > 1), without --deepspeed",
            "accumulate_unsharded",
        )
    refused = (
        ("grads_kept", cfg.grads_kept, "the unsharded gradients are what the micro-batches "
         "keep; drop it (zero_grad(set_to_none=False) of the shards is not modelled with it)"),
        ("optimizer_in_bwd", cfg.optimizer_in_bwd, "an optimizer in backward steps each "
         "micro-batch"),
        ("lora_rank", cfg.lora_rank is not None, "it is modelled for full training (LoRA's "
         "adapters: not yet)"),
        ("offload_optimizer", cfg.offload_optimizer, "it is modelled with the optimizer on "
         "the GPU"),
        ("tp", cfg.tp > 1, "it is modelled without tensor parallelism"),
    )  # fmt: skip
    for field, on, why in refused:
        if on:
            raise ConfigError(f"{flag} with --{field.replace('_', '-')}: {why}", field)
