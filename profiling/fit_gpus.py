"""``fit --gpus N``: one search of the ways to train on N GPUs of a kind, one ranking, one table.

The candidates are plans, all of them: data parallelism over the N GPUs (``profiling.fit``:
DDP and ZeRO-1/2/3 — ZeRO-3 being FSDP over N — with precision, checkpointing, LoRA/QLoRA,
the optimizer offloaded, the micro-batch) and the multi-axis plans (``profiling.fit_plans``:
tensor, context or sequence parallelism or a pipeline beside FSDP over the rest, their
schedules, checkpointing, batch, and FSDP2's CPU offload where no data-parallel candidate
fits with its state on the GPU). Each is estimated in closed form; its
throughput is ``profiling.estimate.throughput``'s for both (the step's compute on one GPU, the
pipeline's bubble, the optimizer step on its shard, the communication compute does not hide),
as ``estimate`` prints it for the same flags. Those that fit are ranked together by
``profiling.fit``'s order — full training, then LoRA, then QLoRA; the optimizer on the GPU
before offloaded; then tokens/s of the job, speeds within 1 % one speed (data parallelism
first there: fewer moving parts) — and shown in ``profiling.fit_render``'s one table. The best
data-parallel candidates are traced to confirm (a plan's trace is per rank: the line under the
table gives its command).

``fit --plans`` (``profiling.fit_plans`` alone) is this search restricted to torchtitan's
plans (FSDP alone among them), in the same table. No torch unless a candidate is traced.
"""

from __future__ import annotations

from collections.abc import Callable

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.fit import FIT_HINT, Candidate, FitResult, confirm_best, fit, rank_key
from profiling.time_bound import TimeBound

# What only data parallelism's search varies or reads: held, the plans are not searched.
_DP_ONLY = ("zero", "lora_rank", "qlora", "deepspeed", "offload_param", "fsdp_flat", "tp",
            "fsdp", "accumulate_unsharded", "paged_optimizer")  # fmt: skip
# What only a plan runs: held, data parallelism is not searched.
_PLAN_ONLY = ("pp", "cp", "ulysses", "dp_shard", "dp_replicate", "float8", "async_tp",
              "checkpoint_every", "pp_schedule", "microbatches", "virtual_stages")  # fmt: skip

COMM_WAIT_NOTE = (
    "comm wait: the communication the step waits for — tensor parallelism's and the context "
    "ring's (every block waits for them) and what of FSDP's, ZeRO's, the replicas' and the "
    "pipeline's transfers exceeds the step's compute (they overlap it); 0.0 ms where the "
    "compute hides them: on one node's NVLink, or across nodes at a batch whose compute "
    "outlasts the gathers and reductions"
)


def fit_gpus(
    base: TrainingConfig,
    confirm: int = 2,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> FitResult:
    """The one search for ``base.gpus`` GPUs (see the module) within ``timeout`` seconds."""
    with TimeBound(timeout, f"fit of {base.model or 'the model'}", FIT_HINT):
        return _fit_gpus(base, confirm, progress)


def _searches(base: TrainingConfig) -> tuple[bool, bool]:
    """(search data parallelism, search the plans) for what the user held."""
    held = base.model_fields_set
    plans = base.gpus > 1 and not (held & set(_DP_ONLY)) and base.target == "cuda"
    dp = not (held & set(_PLAN_ONLY)) and base.checkpointing != "selective-op"
    return dp, plans


def _fit_gpus(
    base: TrainingConfig, confirm: int, progress: Callable[[str], None] | None
) -> FitResult:
    from profiling.fit_plans import best_lines, fit_plans

    dp_on, plans_on = _searches(base)
    dp = fit(base, confirm=0) if dp_on or not plans_on else None
    plan = None
    if plans_on:
        try:
            # FSDP2's CPU offload where nothing else fits with its state on the GPU: an
            # offloaded plan ranks after every candidate that keeps it there
            on_gpu = dp is not None and any(not c.config.offload_optimizer for c in dp.fitting)
            plan = fit_plans(base, base.gpus, multi_axis=dp is not None, offload=not on_gpu)
        except ProfilingError:  # a model no plan runs (torchtitan's Llama only)
            if dp is None:
                raise
    fitting: list[Candidate] = [*(dp.fitting if dp else []), *(plan.fitting if plan else [])]
    fitting.sort(key=rank_key)  # stable: data parallelism first at one speed
    tried = [c for c in (dp.smallest if dp else None, plan.smallest if plan else None) if c]
    if not tried:
        raise ProfilingError(f"no plan of {base.gpus:,} GPUs could be estimated")
    notes = list(dp.notes) if dp else []
    if plan is not None:
        notes += plan.notes[:1] if dp is None else []
        notes += plan.notes[1:]
    from profiling.fit_render import UNITS

    notes += [UNITS] + ([COMM_WAIT_NOTE] if base.gpus > 1 else [])
    fitting = confirm_best(fitting, confirm, base.gpu_mem_bytes() or 0, progress, notes)
    return FitResult(
        base=base,
        gpu_mem_bytes=dp.gpu_mem_bytes if dp else plan.gpu_mem_bytes if plan else 0,
        searched=(dp.searched if dp else 0) + (plan.searched if plan else 0),
        fitting=fitting,
        smallest=min(tried, key=lambda c: c.nvml_bytes),
        notes=notes,
        host_short=dp.host_short if dp else None,
        world=base.gpus,
        plans=plan.searched if plan else 0,
        best_lines=best_lines(fitting) if base.gpus > 1 else [],
    )


__all__ = ["COMM_WAIT_NOTE", "fit_gpus"]
