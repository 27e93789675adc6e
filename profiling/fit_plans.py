"""The parallel plans of N GPUs that fit a model, ranked by estimated throughput: ``fit --gpus
N``'s plan candidates beside data parallelism (``profiling.fit_gpus``), and ``fit --plans``
alone.

For ``--gpus N`` (every GPU of the job here), the search takes every way torchtitan lays N GPUs
out — ``tp`` within a node (1, 2, 4, 8: it must divide the attention and key/value heads and the
sequence), ``cp`` for long sequences (16,384 tokens and more), or in its place DeepSpeed-Ulysses
(``ulysses`` 2, 4, 8 without TP or CP, as it runs: it must divide the attention heads and
divide or be a multiple of the key/value heads), ``pp`` (any divisor the layers split over) and
FSDP2 over the rest (``dp_shard``) — with 1F1B, interleaved and ZBV (only where the closed form
follows ZBV's split backward, ``profiling.plans.zbv_form.modelled``: elsewhere it is not
searched, as fit never vouches for a plan its closed form does not follow), activation
checkpointing (none, torchtitan's selective-op, full, and full on every 2nd or 4th block of a
rank: torchtitan's ``selective_ac_option = "N"``) and,
unless ``--batch`` is given, the batch per data-parallel rank (1, 2, 4 … 64: each setup's
largest that fits, bisected), FSDP2's CPU offload where FSDP shards (torchtitan's
``training.enable_cpu_offload``: ``profiling.plans.cpu_offload``). What the user
gave (``--tp``, ``--pp``, ``--cp``, ``--pp-schedule``, ``--checkpointing``, ``--precision``,
``--batch`` …) is held. Each candidate is the plan's closed form
(``profiling.plans.closed_form``): the highest pipeline rank's peak, and what nvidia-smi
would show there — the allocator's reserve as the closed form bounds it
(``profiling.estimate.counters``), the CUDA context and NCCL's buffers for each of the rank's
communicators (``profiling.estimate.comm``: one per process group the mesh gives it). A
candidate fits when that stays under the GPU
less the stated margin: never on an estimate above it.

Throughput is ``profiling.estimate.throughput``'s, as for data parallelism and as ``estimate``
prints it: the step's FLOPs (``profiling.estimate.time``) over ``tp × cp × ulysses × pp`` GPUs,
with the pipeline's bubble — 1F1B idles ``(pp − 1)/m`` of a step, interleaved ``(pp − 1)/(V·m)``
(Narayanan et al. 2021) — at the GPU's peak × MFU with ``--gpu``, plus the optimizer step on
its shard and the communication compute does not hide (``profiling.estimate.comm``: tensor
parallelism's and the context ring's transfers wait; FSDP's, the replicas' and the pipeline's
show only where they exceed the compute), each over NVLink within a node or the network between
nodes at the GPU's datasheet rates. The bytes each GPU sends per step are shown beside it: the
volume that decides between plans of equal memory, and the first tie-break. No torch.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from profiling._config_plan import plan_world
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.throughput import model_parallel
from profiling.fit import BATCHES, Candidate, usable
from profiling.fit_plan_space import PLAN_FIELDS, largest_index, plan_config, plan_variants, setups
from profiling.plans.host import plan_host
from profiling.plans.step_compute import compute_time
from profiling.units import fmt_bytes


class PlanCandidate(Candidate):
    """A plan's row in fit's one table (``profiling.fit.Candidate``): the highest pipeline
    rank's peak, the most any rank shows on nvidia-smi, tokens/s of the job."""

    plan_rank: int  # the pipeline rank of the highest peak
    peak_at: str
    spread_bytes: int
    comm_bytes: int | None = 0  # what one GPU sends per step (profiling.estimate.comm)

    @property
    def highest_rank(self) -> int | None:
        return self.plan_rank

    @property
    def tokens_per_flop(self) -> float:
        """Per GPU, the bubble counted: the ranking without a GPU."""
        return self.tokens_per_step_flop

    def label(self) -> str:
        c = self.config
        parts = [f"FSDP {c.dp_shard}"] if (c.dp_shard or 1) > 1 else []
        parts += [f"TP {c.tp}"] if c.tp > 1 else []
        parts += [f"CP {c.cp}"] if c.cp > 1 else []
        parts += [f"Ulysses {c.ulysses}"] if c.ulysses > 1 else []
        parts += [f"PP {c.pp} ({c.pp_schedule}, {c.microbatches} microbatches)"] if c.pp > 1 else []
        out = " × ".join(parts) + f", batch {c.batch}"
        m = c.microbatches or 1
        out += f" in {m} accumulated microbatches of {c.batch // m}" if c.pp == 1 < m else ""
        out += f", {c.checkpointing} checkpointing" if c.checkpointing != "none" else ""
        out += f" every {c.checkpoint_every} blocks" if c.checkpoint_every else ""
        return out + (f", Float8 {c.float8}" if c.float8 else "") + (", async TP" * c.async_tp)


class PlanFit(BaseModel):
    base: TrainingConfig
    world: int
    gpu_mem_bytes: int
    searched: int
    fitting: list[PlanCandidate]  # best first
    smallest: PlanCandidate | None
    notes: list[str]
    without_plan: str | None = None  # nothing fits as a plan: the best of plain fit, said


def _candidate(cfg: TrainingConfig, shape: dict[str, Any]) -> PlanCandidate:
    from profiling.estimate.throughput import job_comm, tokens_per_gpu
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.report import rank_nvml
    from profiling.plans.step_compute import compute_time, plan_time

    res = estimate_plan(cfg)
    top = res.highest
    # every rank judged: the last stage's reserve holds the loss's logits, whatever its peak;
    # the estimate's own reading (its stages' layers, the loss on one microbatch's logits, what
    # runs outside the loss), so a plan fits here as `estimate` prints it
    nvml = max(rank_nvml(res, r) for r in res.ranks)
    per_gpu, _ = compute_time(cfg, shape)
    tokens = cfg.batch * cfg.seq_or_default() / (cfg.tp * cfg.cp * cfg.ulysses * cfg.pp)
    # the one throughput model (profiling.estimate.throughput), as `estimate` prints the plan's
    timed = plan_time(cfg, shape, res.params)
    sent = job_comm(cfg, shape, res.params)
    exposed = None
    if timed is not None and sent is not None:
        exposed = sent.exposed_seconds(timed.compute_seconds) or 0.0
    host = plan_host(res)  # FSDP2's CPU offload: the host memory per node
    return PlanCandidate(
        config=cfg, trains="full", peak_bytes=top.peak_bytes, peak_moment=top.peak_at,
        nvml_bytes=nvml, plan_rank=top.pp_rank, peak_at=top.peak_at,
        spread_bytes=res.spread_bytes, world=plan_world(cfg),
        tokens_per_second=timed.tokens_per_second if timed else None,
        tokens_per_gpu=tokens_per_gpu(timed) if timed else None,
        tokens_per_step_flop=tokens / per_gpu if per_gpu else 0.0,
        comm_bytes=sent.bytes if sent is not None else 0, exposed_seconds=exposed,
        host_bytes=host["per_node_bytes"] if host else None,
    )  # fmt: skip


def _search_setup(
    cfgs: list[TrainingConfig],
    shape: dict[str, Any],
    budget: int,
    per_setup: bool,
    tried: list[PlanCandidate],
) -> list[PlanCandidate]:
    """Of one setup's configurations (batches ascending) those that fit; ``per_setup``: only
    the largest batch that fits, bisected. Every candidate estimated is added to ``tried``."""
    from profiling.time_bound import checkpoint

    seen: dict[int, PlanCandidate | None] = {}

    def fits(i: int) -> bool:
        if i not in seen:
            checkpoint()
            try:
                seen[i] = _candidate(cfgs[i], shape)
            except ProfilingError:  # a split torchtitan cannot make, selective checkpointing …
                seen[i] = None
            tried.extend(c for c in [seen[i]] if c is not None)
        cand = seen[i]
        return cand is not None and cand.nvml_bytes <= budget

    if not per_setup:
        return [c for i in range(len(cfgs)) if fits(i) and (c := seen[i]) is not None]
    best = largest_index(fits, len(cfgs))  # the largest batch that fits
    return [c for c in [seen.get(best)] if c is not None] if best is not None else []


def fit_plans(
    base: TrainingConfig,
    world: int,
    async_tp: bool = False,
    global_batch: int | None = None,
    multi_axis: bool = False,
    offload: bool = True,
) -> PlanFit:
    """Every plan of ``world`` GPUs estimated; those that fit ranked (see the module); with
    ``async_tp`` every candidate with tensor parallelism runs it asynchronously; with
    ``global_batch`` the sequences per step over the data-parallel ranks held and each plan's
    gradient accumulation searched (``profiling.fit_accum``); ``multi_axis``: only plans with
    TP, CP, Ulysses or a pipeline (``fit --gpus N``'s data-parallel candidates are the rest).
    With the batch searched, each setup's largest batch that fits, bisected: a larger batch
    is never slower here (the bubble and the optimizer step spread over more tokens). When no
    plan fits, the plans with FSDP2's CPU offload (``profiling.plans.cpu_offload``: slower, the
    optimizer on the host) are searched too (``offload``), unless --offload-optimizer was given
    either way."""
    res = _fit_plans(base, world, async_tp, global_batch, multi_axis)
    if res.fitting or not offload or "offload_optimizer" in base.model_fields_set:
        return res
    off = _fit_plans(base.model_copy(update={"offload_optimizer": True, "fsdp": True}), world,
                     async_tp, global_batch, multi_axis)  # fmt: skip
    if not off.fitting:
        return res
    off.notes.append(
        "no plan fits with its state on the GPU: these run FSDP2's CPU offload (torchtitan's "
        "training.enable_cpu_offload, fully_shard's CPUOffloadPolicy: the shards, their "
        "gradients and Adam's state pinned in host memory, host/node; the optimizer steps on "
        "the CPU)"
    )
    return off.model_copy(update={"base": base, "searched": res.searched + off.searched})


def _fit_plans(
    base: TrainingConfig, world: int, async_tp: bool, global_batch: int | None, multi_axis: bool
) -> PlanFit:
    from profiling.estimate.comm import GPUS_PER_NODE, PER_COMMUNICATOR, link
    from profiling.estimate.shape import shape_of
    from profiling.plans.model import plan_workload
    from profiling.plans.zbv_form import modelled as zbv_modelled

    avail = base.gpu_mem_bytes()
    if avail is None:
        raise ProfilingError("fit needs --gpu-mem GB or --gpu NAME (the memory to fit in)")
    w = plan_workload(base, searched=True)
    shape = shape_of(base)
    budget = usable(avail)
    fitting: list[PlanCandidate] = []
    if global_batch is not None and "batch" in base.model_fields_set:
        raise ProfilingError(
            "give --global-batch or --batch, not both: the global batch over the data-parallel "
            "ranks sets each rank's batch"
        )
    per_setup = global_batch is None and "batch" not in base.model_fields_set
    tried: list[PlanCandidate] = []
    variants = plan_variants(base, world, w.heads, w.n_kv_heads, global_batch)
    for setup in setups(variants, per_setup):
        cfgs = []
        for update in setup:
            cfg = plan_config(base, {**update, "async_tp": async_tp and update.get("tp", 1) > 1})
            if cfg is None or (cfg.pp > 1 and cfg.pp_schedule == "zbv" and not zbv_modelled(cfg)):
                continue
            if multi_axis and model_parallel(cfg) == 1:
                continue  # FSDP or DDP alone: fit's data-parallel candidates (ZeRO-3, DDP)
            cfgs.append(cfg)
        fitting += _search_setup(cfgs, shape, budget, per_setup, tried)
    searched = len(tried)
    smallest = min(tried, key=lambda c: c.nvml_bytes, default=None)
    fitting.sort(key=_rank_key)
    from profiling.estimate.counters import context_text

    notes = [
        f"fits = what nvidia-smi would show on the highest pipeline rank ≤ "
        f"{fmt_bytes(budget, 'GB')} ({fmt_bytes(avail, 'GB')} less the safety margin): "
        "allocated + the caching allocator's reserve in closed form (profiling.estimate.reserve: "
        "cached blocks between sizes, the loss's logits, FSDP2's streams, a partly empty segment "
        f"per pool), the {context_text(base)} and NCCL "
        f"{PER_COMMUNICATOR // 2**20} MiB per communicator (one per process group of the mesh: "
        "FSDP, DP-replicate, TP, CP, PP)",
        "ranked by estimated tokens/s (the job's; /GPU: ÷ its GPUs)"
        + (
            " with the optimizer step and the communication compute does not hide"
            if base.gpu
            else " per FLOP (no --gpu: communication not timed)"
        )
        + ", the pipeline's bubble counted (1F1B (pp − 1)/m, interleaved (pp − 1)/(V·m); "
        "ZBV's as interleaved's at V = 2; ZBV only where its closed form follows it: no "
        "Ulysses, not CP beside TP, checkpointing none or full)",
        "closed form per plan: trace the chosen plan ('journal-agent trace' with its flags) for "
        "torch's own numbers",
    ]
    ln = link(base)
    if ln is not None:
        notes.append(
            f"links: NVLink {ln.nvlink_gbs:g} GB/s within a node of {GPUS_PER_NODE} GPUs, "
            f"{ln.network_gbs:g} GB/s between nodes, per GPU and direction ({ln.source}); the "
            "innermost mesh dimensions (tp, cp, dp_shard …) fill a node first"
        )
    if base.float8 or async_tp:
        notes.append(
            "every candidate runs " + " and ".join(
                [f"Float8 {base.float8} (its casts in the memory)"] * bool(base.float8)
                + ["asynchronous TP where it has TP (its workspace in nvidia-smi)"] * async_tp)
            + "; tokens/s count bf16 matmuls and blocking TP collectives all the same"
        )  # fmt: skip
    held = sorted(set(base.model_fields_set) & {*PLAN_FIELDS, "batch", "precision"})
    if held:
        notes.append("held as given, not searched: " + ", ".join(held))
    if global_batch is not None:
        notes.append(
            f"global batch {global_batch:,} sequences per step: each plan's rank takes "
            f"{global_batch:,} / its data-parallel degree, without a pipeline in microbatches "
            f"of {', '.join(map(str, BATCHES))} accumulated (torchtitan's "
            "gradient_accumulation_steps: each microbatch gathers and reduce-scatters again)"
        )
    return PlanFit(base=base, world=world, gpu_mem_bytes=avail, searched=searched,
                   fitting=fitting, smallest=smallest, notes=notes,
                   without_plan=None if fitting or multi_axis else _without_plan(base, world),
                   )  # fmt: skip


def _without_plan(base: TrainingConfig, world: int) -> str | None:
    """When no plan fits: the best of ``fit --gpus N`` without --plans — data parallelism with
    ZeRO and the optimizer offloaded to the CPU, beside the plans — or None.
    Only where the user held no plan degree (those need a plan)."""
    from profiling.fit import fit

    if set(base.model_fields_set) & {"tp", "cp", "ulysses", "pp", "float8", "async_tp"}:
        return None
    if base.checkpointing == "selective-op" or base.checkpoint_every is not None:
        return None
    plain = {k: v for k, v in base.model_dump(exclude_unset=True).items() if k != "fsdp"}
    try:
        dp = fit(TrainingConfig(**{**plain, "gpus": world}), confirm=0)
    except ProfilingError:
        return None
    if not dp.fitting:
        return None
    best = dp.fitting[0]
    speed = f", {best.tokens_per_second:,.0f} tokens/s" if best.tokens_per_second else ""
    return (
        f"without a plan, {len(dp.fitting)} configuration(s) of {world} GPUs fit (fit --gpus "
        f"{world} without --plans, which also searches ZeRO stages and the optimizer offloaded "
        f"to the CPU); the best: {best.label()}, {fmt_bytes(best.nvml_bytes, 'GB')} on "
        f"nvidia-smi{speed}"
    )


def _rank_key(c: PlanCandidate) -> tuple[float, float, int]:
    """Faster first; at one speed, fewer bytes sent per token, then less memory."""
    speed = c.tokens_per_second if c.tokens_per_second is not None else c.tokens_per_flop
    tokens = c.config.batch * c.config.seq_or_default()
    return (-round(speed, 12), (c.comm_bytes or 0) / tokens, c.nvml_bytes)


def render_plan_fit(res: PlanFit, top: int = 10) -> str:
    b = res.base
    name = b.model or "the shape given"
    lines = [
        f"What fits: {name}, seq {b.seq_or_default()}, "
        f"{b.precision if 'precision' in b.model_fields_set else 'mixed'} {b.optimizer}, "
        f"{res.world:,} GPUs of {fmt_bytes(res.gpu_mem_bytes, 'GB')}"
        + (f" ({b.gpu})" if b.gpu else "")
        + f" — {res.searched} plans estimated",
        "",
    ]
    if not res.fitting:
        s = res.smallest
        lines.append(
            "Nothing fits: no plan was estimated" if s is None else
            f"Nothing fits: the smallest need is {fmt_bytes(s.nvml_bytes, 'GB')} on nvidia-smi "
            f"({fmt_bytes(s.peak_bytes, 'GB')} allocated) on pipeline rank {s.highest_rank} "
            f"({s.label()}), against {fmt_bytes(usable(res.gpu_mem_bytes), 'GB')} usable."
        )  # fmt: skip
        lines += [res.without_plan] if res.without_plan else []
        lines += [f"note: {n}" for n in res.notes[:1]]
        return "\n".join(lines)
    from profiling.fit_render import table

    lines += table(list(res.fitting), top, several=True)
    lines += best_lines(list(res.fitting))
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def best_lines(fitting: list[Candidate]) -> list[str]:
    """Under fit's table: the best — a plan's highest rank and spread, what the communication
    says against the runner-up, how to trace it — and the command whose ``estimate`` prints
    the same numbers."""
    if not fitting:
        return []
    best, lines = fitting[0], []
    if isinstance(best, PlanCandidate):
        spread = (f"; the ranks differ by {fmt_bytes(best.spread_bytes, 'GB')}"
                  if best.config.pp > 1 else "")  # fmt: skip
        lines.append(
            f"best: {best.label()}: {fmt_bytes(best.peak_bytes, 'GB')} allocated, "
            f"{fmt_bytes(best.nvml_bytes, 'GB')} on nvidia-smi on pipeline rank "
            f"{best.plan_rank} (at the {best.peak_at}){spread}"
        )
    lines += _decided(fitting)
    flags = " ".join(estimate_flags(best.config))
    if isinstance(best, PlanCandidate):
        lines.append("trace it: journal-agent trace " + " ".join(plan_flags(best.config)))
    lines.append(f"estimate it (the same numbers): journal-agent estimate {flags}")
    return lines


def _decided(fitting: list[Candidate]) -> list[str]:
    """What the communication says between the best and the runner-up."""
    if len(fitting) < 2 or fitting[0].comm_bytes is None or fitting[1].comm_bytes is None:
        return []
    a, b = fitting[0], fitting[1]
    line = (
        f"communication: #1 sends {fmt_bytes(a.comm_bytes or 0, 'GB')} per GPU per step, #2 "
        f"{fmt_bytes(b.comm_bytes or 0, 'GB')}"
    )
    if a.exposed_seconds is not None and b.exposed_seconds is not None:
        line += (
            f"; not hidden by compute: {a.exposed_seconds * 1e3:,.1f} ms against "
            f"{b.exposed_seconds * 1e3:,.1f} ms"
        )
    return [line]


def estimate_flags(cfg: TrainingConfig) -> list[str]:
    """The flags ``estimate`` takes for a candidate (a plan's degrees, or data parallelism's
    --gpus and ZeRO stage), its GPU named for tokens/s."""
    out = plan_flags(cfg) if cfg.is_plan else _plain_flags(cfg)
    out += (
        [f"--gpu {cfg.gpu}"] if cfg.gpu else [f"--gpu-mem {cfg.gpu_mem:g}"] if cfg.gpu_mem else []
    )
    return out + (["--offload-optimizer"] if cfg.is_plan and cfg.offload_optimizer else [])


def _plain_flags(cfg: TrainingConfig) -> list[str]:
    out = []
    for field, value in cfg.model_dump(exclude_defaults=True).items():
        if field in ("gpu", "gpu_mem") or value is None or value is False:
            continue
        flag = "--" + field.replace("_", "-")
        out.append(flag if value is True else f"{flag} {value}")
    return out


def plan_flags(cfg: TrainingConfig) -> list[str]:
    """The plan's flags, to trace or estimate it (a shape by hand: its own flags before)."""
    out = [f"--model {cfg.model}"] if cfg.model else []
    for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "arch", "params"):
        value = getattr(cfg, field) if not cfg.model else None
        out += [f"--{field.replace('_', '-')} {value}"] if value is not None else []
    out += [f"--seq {cfg.seq_or_default()}", f"--precision {cfg.precision}"]
    out += [f"--dp-shard {cfg.dp_shard}"] if cfg.dp_shard else []
    out += [f"--tp {cfg.tp}"] if cfg.tp > 1 else []
    out += [f"--cp {cfg.cp}"] if cfg.cp > 1 else []
    out += [f"--ulysses {cfg.ulysses}"] if cfg.ulysses > 1 else []
    if cfg.pp > 1:
        out += [f"--pp {cfg.pp}", f"--pp-schedule {cfg.pp_schedule}",
                f"--microbatches {cfg.microbatches}"]  # fmt: skip
    out += [f"--batch {cfg.batch}"]
    out += [f"--microbatches {cfg.microbatches}"] if cfg.pp == 1 < (cfg.microbatches or 1) else []
    out += [f"--checkpointing {cfg.checkpointing}"] if cfg.checkpointing != "none" else []
    out += [f"--checkpoint-every {cfg.checkpoint_every}"] if cfg.checkpoint_every else []
    out += [f"--float8 {cfg.float8}"] if cfg.float8 else []
    out += ["--float8-all-gather"] * cfg.float8_all_gather + ["--async-tp"] * cfg.async_tp
    return out


def _row(c: PlanCandidate) -> dict[str, Any]:
    from profiling.fit_render import row_json

    return {**row_json(c), "peak_at": c.peak_at, "spread_bytes": c.spread_bytes,
            "comm_bytes": c.comm_bytes, "flags": plan_flags(c.config)}  # fmt: skip


def plan_fit_json(res: PlanFit) -> dict[str, Any]:
    return {
        "world": res.world, "gpu_mem_bytes": res.gpu_mem_bytes,
        "usable_bytes": usable(res.gpu_mem_bytes), "searched": res.searched,
        "fits": bool(res.fitting), "fitting": [_row(c) for c in res.fitting],
        "smallest": _row(res.smallest) if res.smallest else None, "notes": res.notes,
        "without_plan": res.without_plan,
    }  # fmt: skip


def plan_fit_record(res: PlanFit, top: int = 10) -> Any:
    """What ``fit --plans`` prints, as a record to cite: each shown plan's peak, nvidia-smi and
    tokens/s, the GPU's memory and the part of it counted as usable."""
    from profiling.fit_render import row_quantities
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=usable(res.gpu_mem_bytes), unit="B"),
    ]
    if res.smallest is not None:
        results.append(Quantity(name="smallest_nvml", value=res.smallest.nvml_bytes, unit="B"))
    for i, c in enumerate(res.fitting[:top], 1):
        results += row_quantities(i, c)
    text = render_plan_fit(res, top)
    return MeasurementRecord(
        id=new_record_id("estimated"), kind="estimated",
        title=text.splitlines()[0], device={"gpu_mem_bytes": res.gpu_mem_bytes, "gpus": res.world},
        software=software_versions(), config=res.base.model_dump(), results=results,
        notes="\n".join(res.notes), extra={"table": text},
    )  # fmt: skip


__all__ = [
    "PlanCandidate", "PlanFit", "best_lines", "compute_time", "estimate_flags", "fit_plans",
    "plan_fit_json", "plan_fit_record", "plan_flags", "render_plan_fit",
]  # fmt: skip
