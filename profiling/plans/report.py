"""A plan's result as the CLI and the tools give it: per-rank text, JSON, the saved record.

Every output names the pipeline rank with the highest peak (and the global ranks it stands
for) and the spread over ranks; the record keeps each distinct rank (its peak, the moment of it,
its categories there) and each stage's profile, so a journal entry can cite any of them.
``plan_and_record`` estimates or traces, saves and renders: the one function for ``estimate``,
``trace`` and the ``MemoryEstimate`` tool. No torch here (the trace imports it when it runs).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from profiling.config import TrainingConfig
from profiling.estimate.comm import Comm, comm_lines, comm_quantities
from profiling.estimate.counters import Counters, context_text
from profiling.estimate.deepspeed_engine import host_text
from profiling.estimate.record import host_quantities
from profiling.estimate.step_time import StepTime
from profiling.plans.host import plan_host
from profiling.plans.profile import CATEGORIES, RankMemory
from profiling.plans.result import PlanResult
from profiling.records import (
    MeasurementRecord,
    Quantity,
    RecordStore,
    new_record_id,
    software_versions,
)
from profiling.time_bound import TimeBound
from profiling.units import fmt_bytes


def _title(result: PlanResult) -> str:
    what = "Trace" if result.kind == "traced" else "Estimate"
    return f"{what}: {result.config.describe()}, {result.layout.world:,} GPUs"


def plan_comm(result: PlanResult) -> tuple[Comm, float | None]:
    """What a GPU of the plan sends per step and NCCL's buffers on it, with the step's compute
    time (with --gpu) that the overlapped transfers hide behind."""
    from profiling.estimate.comm import comm
    from profiling.estimate.shape import shape_of
    from profiling.plans.step_compute import compute_time

    shape = shape_of(result.config)
    return comm(result.config, shape, result.params), compute_time(result.config, shape)[1]


def _plan_time(result: PlanResult) -> StepTime | None:
    """The plan's step time and tokens/s with --gpu (``profiling.estimate.throughput``)."""
    from profiling.estimate.shape import shape_of
    from profiling.plans.step_compute import plan_time

    return plan_time(result.config, shape_of(result.config), result.params)


def rank_counters(result: PlanResult, rank: RankMemory) -> Counters:
    """The counters of a GPU of ``rank``: its peak, the caching allocator's reserve — its step
    replayed when the trace kept it (``--counter reserved|nvml``), else the closed form's bound
    over the peak — and nvidia-smi with the CUDA context and NCCL's buffers
    (``profiling.estimate.counters``)."""
    from profiling.estimate.counters import closed_form, tensors_alive, workspaces

    replay = result.replays.get(rank.pp_rank)
    if replay is not None:
        # never below the rank's peak column (a guard: the composition is exact in tensors,
        # the replay adds the blocks' rounding — ZBV's same-rank hand-over, which kept 10 MiB
        # too many, is followed since: profile.LocalHandOver)
        floor = rank.peak_bytes + sum(workspaces(result.config))
        return replay.counters(result.config, floor=floor)
    layers = sum(result.layout.stages[i].layers for i in rank.stages)
    shape = {"param_tensors": 9 * layers + 3, "layers": layers}
    loss = any(result.layout.stages[i].head for i in rank.stages)  # the last stage's
    tensors = tensors_alive(result.config, shape)
    cfg = result.config
    if result.layout.pp > 1:
        # a pipeline's last stage runs the loss one microbatch at a time (the schedule's
        # loss_fn on each microbatch's output): its logits' segments are a microbatch's, made
        # by the first and reused by the next (the whole local batch's were counted: 405B's
        # last rank reserved 2× its allocated peak)
        cfg = cfg.model_copy(update={"batch": result.layout.microbatch_size})
    from profiling.plans.outside_loss import outside_loss_peak

    outside = outside_loss_peak(result, rank)
    return closed_form(cfg, rank.peak_bytes, tensors, outside_loss=outside, loss=loss)


def rank_nvml(result: PlanResult, rank: RankMemory) -> int:
    """What nvidia-smi would show on a GPU of ``rank`` (:func:`rank_counters`)."""
    return rank_counters(result, rank).nvml.bytes


def render_plan(result: PlanResult) -> str:
    """The per-rank table: each pipeline rank's peak, what nvidia-smi would show, where the
    peak is and what it is made of; then what a GPU sends per step."""
    lay = result.layout
    lines = [_title(result), ""]
    lines.append(
        f"{'pp rank':<8} {'GPUs (global ranks)':<22} {'stages':<8} {'peak':>11} "
        f"{'nvidia-smi':>11}  at"
    )
    for r in result.ranks:
        stages = ",".join(map(str, r.stages))
        lines.append(
            f"{r.pp_rank:<8} {r.global_ranks:<22} {stages:<8} "
            f"{fmt_bytes(r.peak_bytes):>11} {fmt_bytes(rank_nvml(result, r)):>11}  {r.peak_at}"
        )
    top = result.highest
    lines.append("")
    lines.append(
        f"highest peak: pipeline rank {top.pp_rank} (global ranks {top.global_ranks}), "
        f"{fmt_bytes(top.peak_bytes)} ({fmt_bytes(top.peak_bytes, 'GiB')}) per GPU, "
        f"at the {top.peak_at}"
    )
    lines.append(
        f"spread over the {lay.world:,} GPUs: {fmt_bytes(result.spread_bytes)} "
        f"(lowest: pipeline rank {result.lowest.pp_rank}, "
        f"{fmt_bytes(result.lowest.peak_bytes)}); each pipeline rank's "
        f"{lay.ranks_each:,} GPUs hold the same"
    )
    parts = ", ".join(
        f"{c} {fmt_bytes(top.by_category[c])}" for c in CATEGORIES if top.by_category[c]
    )
    lines.append(f"at that peak: {parts}")
    if lay.pp > 1:
        n = top.in_flight
        lines.append(
            f"in flight on pipeline rank {top.pp_rank}: at most {n} "
            f"microbatch{'es' * (n != 1)}' activations (a stage's each)"
        )
    lines += host_text(plan_host(result))  # FSDP2's CPU offload (plans.cpu_offload)
    sent, compute = plan_comm(result)
    lines += _reserve_lines(result, sent.nccl_bytes > 0)
    lines += comm_lines(sent, compute)
    timed = _plan_time(result)
    if timed is not None:  # fit's throughput model: the number its table ranks this plan by
        from profiling.estimate.step_time import render_time

        lines += render_time(timed)
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _reserve_lines(result: PlanResult, nccl: bool) -> list[str]:
    """How nvidia-smi's column is made; with --counter reserved|nvml the highest rank's
    counters, each stream's segments when its step was replayed."""
    from profiling.estimate.counters import counter_lines

    top = result.highest
    replay = result.replays.get(top.pp_rank)
    if replay is None:
        expandable = result.config.expandable_segments
        lines = [
            "nvidia-smi: the peak + cuBLAS workspaces + the caching allocator's reserve (a "
            "closed-form bound: cached blocks between sizes, the loss's logits, mid-sized "
            "gradients, FSDP2's streams, a partly empty segment per pool"
            + (", expandable segments" if expandable else "")
            + f") + the {context_text(result.config)}"
            + (" + NCCL's buffers (below)" if nccl else "")
        ]
    else:
        lines = [
            f"nvidia-smi: pipeline rank {top.pp_rank}'s step replayed through the caching "
            f"allocator (its reserve) + the {context_text(result.config)}"
            + (" + NCCL's buffers (below)" if nccl else "")
        ]
    from profiling.estimate.symm_mem import symm_mem_bytes, symm_mem_text

    if symm_mem_bytes(result.config):  # async TP's workspace, outside the allocator too
        lines[0] += " + " + symm_mem_text(result.config)
    if result.config.counter == "allocated":
        return lines
    lines += counter_lines(rank_counters(result, top), result.config.counter)
    if replay is not None:
        by = (
            replay.by_stream_expandable if result.config.expandable_segments else (replay.by_stream)
        )
        parts = ", ".join(f"{name} {fmt_bytes(b)}" for name, b in by.items())
        lines.append(f"  the reserve by stream (blocks are never shared between streams): {parts}")
    return lines


def _counter_quantities(result: PlanResult) -> list[Quantity]:
    """What ``_reserve_lines`` prints beyond the table: the highest rank's counters and each
    stream's segments."""
    if result.config.counter == "allocated":
        return []
    from profiling.estimate.record import counter_quantities

    top = result.highest
    out = counter_quantities(rank_counters(result, top), None)
    replay = result.replays.get(top.pp_rank)
    if replay is not None:
        by = (
            replay.by_stream_expandable if result.config.expandable_segments else (replay.by_stream)
        )
        out += [
            Quantity(name=f"reserve: {name} stream", value=b, unit="B") for name, b in by.items()
        ]
    return out


def plan_record(result: PlanResult) -> MeasurementRecord:
    top = result.highest
    results = [
        Quantity(name="peak", value=top.peak_bytes, unit="B"),
        Quantity(name="per_gpu_total", value=top.peak_bytes, unit="B"),
        Quantity(name="spread", value=result.spread_bytes, unit="B"),
        Quantity(name="params", value=result.params, unit=""),
        Quantity(name="world", value=result.layout.world, unit="GPUs"),
    ]
    from profiling.fit import judge_quantities

    results += comm_quantities(*plan_comm(result)) + judge_quantities(result.config)
    timed = _plan_time(result)
    if timed is not None:
        mem = result.config.gpu_mem_bytes()  # the GPU's, named in the time lines
        results += [Quantity(name="gpu_mem", value=mem, unit="B")] if mem else []
        results.append(Quantity(name="tokens/s", value=timed.tokens_per_second, unit="tokens/s"))
        results.append(Quantity(name="step time", value=timed.step_seconds, unit="s"))
    results += _counter_quantities(result) + host_quantities(plan_host(result))
    for r in result.ranks:
        results.append(Quantity(name=f"pp rank {r.pp_rank}: peak", value=r.peak_bytes, unit="B"))
        results.append(
            Quantity(name=f"pp rank {r.pp_rank}: nvidia-smi", value=rank_nvml(result, r), unit="B")
        )
        results += [
            Quantity(name=f"pp rank {r.pp_rank}: {c}", value=v, unit="B")
            for c, v in r.by_category.items()
            if v
        ]
    return MeasurementRecord(
        id=new_record_id(result.kind),
        kind=result.kind,
        title=_title(result),
        device={"gpus": result.layout.world},
        software=software_versions(
            **({"torch": result.torch_version} if result.torch_version else {})
        ),
        config=result.config.model_dump(),
        results=results,
        steps=timed.steps if timed is not None else [],  # the time lines' every number
        notes="\n".join(result.notes),
        extra={
            "table": render_plan(result),
            "highest_pp_rank": top.pp_rank,
            "layout": result.layout.model_dump(),
            "ranks": [r.model_dump() for r in result.ranks],
            "stages": [s.model_dump() for s in result.stages],
        },
    )


def plan_json(result: PlanResult, record_id: str) -> dict[str, Any]:
    top = result.highest
    return {
        "record_id": record_id,
        "kind": result.kind,
        "world": result.layout.world,
        "plan": result.config.describe(),
        "params": result.params,
        "per_gpu_bytes": top.peak_bytes,
        "highest": {
            "pp_rank": top.pp_rank,
            "global_ranks": top.global_ranks,
            "peak_bytes": top.peak_bytes,
            "at": top.peak_at,
        },
        "spread_bytes": result.spread_bytes,
        "ranks": [r.model_dump() for r in result.ranks],
        "nvml_bytes": {r.pp_rank: rank_nvml(result, r) for r in result.ranks},
        "comm": plan_comm(result)[0].model_dump(),
        "host": plan_host(result),
        "time": t.model_dump() if (t := _plan_time(result)) is not None else None,
        "layout": result.layout.model_dump(),
        "wall_seconds": result.wall_seconds,
        "notes": result.notes,
    }


class PlanRun(BaseModel):
    """One run of a plan: its result, saved record and JSON."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    result: PlanResult
    record: MeasurementRecord
    payload: dict[str, Any]

    def text(self) -> str:
        cite = f"record: {self.record.id}  (cite as {self.record.citation()})"
        return f"{render_plan(self.result)}\n{cite}"


def plan_and_record(
    config: TrainingConfig,
    store: RecordStore,
    *,
    traced: bool,
    timeout: float | None = None,
    progress: Any = None,
) -> PlanRun:
    """Estimate (closed form) or trace ``config``'s plan, save its record, render it."""
    if traced:
        from profiling.plans.trace import trace_plan

        with TimeBound(timeout, "the trace of the plan", "give it a longer --timeout"):
            result = trace_plan(config, progress)
    else:
        from profiling.plans.closed_form import estimate_plan

        with TimeBound(timeout, "the estimate of the plan", "check the sizes given"):
            result = estimate_plan(config)
    record = plan_record(result)
    store.save(record)
    return PlanRun(result=result, record=record, payload=plan_json(result, record.id))


__all__ = [
    "PlanRun", "plan_and_record", "plan_comm", "plan_json", "plan_record", "rank_counters",
    "rank_nvml", "render_plan",
]  # fmt: skip
