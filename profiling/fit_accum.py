"""``fit --plans --global-batch N``: the batch of each candidate plan, its gradient accumulation
searched.

torchtitan fixes the sequences one optimizer step takes over all data-parallel ranks
(``training.global_batch_size``) and runs ``global / (local_batch_size × dp)`` microbatches of
``local_batch_size`` per rank, accumulating their gradients (pytorch/torchtitan
torchtitan/train.py at v0.2.2, 73a0e69: ``gradient_accumulation_steps = global_batch_size //
(local_batch_size * batch_degree)``, the batch mesh ``dp_replicate × dp_shard``; cp ranks share
a sequence). So a plan's rank takes ``global / dp`` sequences per step, and without a pipeline
the search varies the microbatch over ``BATCHES`` (M = that batch / microbatch; fewer
microbatches gather and reduce fewer times, more hold fewer activations: ``fit`` ranks them by
tokens/s among those that fit). A pipeline's microbatches are its schedule's (one sequence each
by default, as without a global batch). No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.fit import BATCHES


def plan_batches(
    base: TrainingConfig, global_batch: int | None, dp: int, pp: int
) -> list[tuple[int, int | None]]:
    """(batch per data-parallel rank, microbatches) for a candidate of ``dp`` data-parallel
    ranks and ``pp`` pipeline stages; what the user held is held."""
    held = base.model_fields_set
    given = base.microbatches if "microbatches" in held else None
    if global_batch is None:
        batches = (base.batch,) if "batch" in held else BATCHES
        # a pipeline: microbatches of 1, as torchtitan's default pipeline_parallel_microbatch_size
        return [(b, given or (b if pp > 1 else None)) for b in batches]
    if global_batch % dp:
        return []  # torchtitan refuses a global batch the data-parallel ranks do not divide
    per_rank = global_batch // dp
    if pp > 1 or given is not None:
        return [(per_rank, given or (per_rank if pp > 1 else None))]
    sizes = [mb for mb in BATCHES if mb <= per_rank and per_rank % mb == 0]
    return [(per_rank, per_rank // mb if mb < per_rank else None) for mb in sizes]


__all__ = ["plan_batches"]
