"""A plan's rank at its highest outside the loss: what the caching allocator's closed-form
reserve needs to tell the loss's own segments from the rest (``profiling.estimate.reserve``'s
``outside_loss``: the logits, their fp32 copy and the log-probabilities each take a segment
of their own above the reserve of the step outside the loss; where the loss is the peak, those
segments are part of the allocated peak already, not more on top of it).

No torch here.
"""

from __future__ import annotations

from profiling.plans.closed_form import stage_profile
from profiling.plans.model import plan_workload
from profiling.plans.profile import RankMemory
from profiling.plans.result import PlanResult
from profiling.plans.ring_stage import highest_ring_rank


def outside_loss_peak(result: PlanResult, rank: RankMemory) -> int | None:
    """``rank``'s peak composed from its stages' closed form with the loss's transients (the
    logits' fp32 copies and the loss's bookkeeping, forward and backward) left out, on the
    ring's highest place as ``estimate_plan`` composes it; None for a rank without the loss.
    A traced rank's moments are torch's, not named: its peak less what the loss's transients
    add above the rest in closed form (the closed form equals the trace on the loss's tensors),
    so ``trace`` and ``estimate`` of one plan print one nvidia-smi figure where their peaks
    agree — the whole three fp32 logits on top of a traced peak put torchtitan's Llama 3 8B
    (``llama3_8b@9dec370.toml``, FSDP 8) at 64.99 GB against the estimate's 58.45 GB."""
    layout = result.layout
    if not any(layout.stages[i].head for i in rank.stages):
        return None
    cfg, w = result.config, plan_workload(result.config)

    def composed(loss: bool) -> int:
        ranks, _ = highest_ring_rank(
            layout,
            lambda r: [stage_profile(cfg, w, layout, s, r, loss=loss) for s in layout.stages],
        )
        return ranks[rank.pp_rank].peak_bytes

    outside = composed(False)
    if result.kind == "estimated":
        return outside
    return max(0, rank.peak_bytes - (composed(True) - outside))


__all__ = ["outside_loss_peak"]
