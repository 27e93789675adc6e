"""``fit --plans``: which parallel plan of N GPUs fits a model, ranked by estimated throughput.

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
unless ``--batch`` is given, the batch per data-parallel rank (1, 2, 4 … 64). What the user
gave (``--tp``, ``--pp``, ``--cp``, ``--pp-schedule``, ``--checkpointing``, ``--precision``,
``--batch`` …) is held. Each candidate is the plan's closed form
(``profiling.plans.closed_form``): the highest pipeline rank's peak, and what nvidia-smi
would show there — the allocator's reserve as the closed form bounds it
(``profiling.estimate.counters``), the CUDA context and NCCL's buffers for each of the rank's
communicators (``profiling.estimate.comm``: one per process group the mesh gives it). A
candidate fits when that stays under the GPU
less the stated margin: never on an estimate above it.

Throughput is estimated per GPU: the step's FLOPs (``profiling.estimate.time``) over
``tp × cp × ulysses × pp`` GPUs, with the pipeline's bubble — 1F1B idles ``(pp − 1)/m`` of a step,
interleaved ``(pp − 1)/(V·m)`` (Narayanan et al. 2021) — at the GPU's peak × MFU with
``--gpu``, plus the communication compute does not hide (``profiling.estimate.comm``: tensor
parallelism's and the context ring's transfers wait; FSDP's, the replicas' and the pipeline's
show only where they exceed the compute), each over NVLink within a node or the network between
nodes at the GPU's datasheet rates. The bytes each GPU sends per step are shown beside it: the
volume that decides between plans of equal memory, and the first tie-break. No torch.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.fit import BATCHES, usable
from profiling.plans.step_compute import compute_time
from profiling.units import fmt_bytes

TP_DEGREES = (1, 2, 4, 8)  # within a node, as torchtitan's recipes run it
CP_DEGREES = (1, 2, 4, 8)
CP_FROM_SEQ = 16_384  # context parallelism is searched from this sequence length on
# ZBV where the closed form follows its split backward (profiling.plans.zbv_form.modelled:
# no Ulysses or compile, checkpointing none or full, Float8 alone), else not searched
SCHEDULES = ("1f1b", "interleaved", "zbv")
ULYSSES_DEGREES = (2, 4, 8)  # DeepSpeed's sequence_parallel_size, searched where CP is
PLAN_FIELDS = ("tp", "cp", "ulysses", "pp", "pp_schedule", "checkpointing", "checkpoint_every",
               "microbatches", "virtual_stages", "dp_replicate")  # fmt: skip
# (checkpointing, every N-th block): what is searched unless --checkpointing is given
CHECKPOINTING = (("none", None), ("selective-op", None), ("full", None), ("full", 2), ("full", 4))


class PlanCandidate(BaseModel):
    config: TrainingConfig
    peak_bytes: int  # allocated, on the highest pipeline rank
    nvml_bytes: int  # what nvidia-smi would show there
    highest_rank: int
    peak_at: str
    spread_bytes: int
    tokens_per_second: float | None  # per GPU, with --gpu
    tokens_per_flop: float  # per GPU, bubble counted: the ranking without a GPU
    comm_bytes: int  # what one GPU sends per step (profiling.estimate.comm)
    exposed_seconds: float | None = None  # of it, what compute does not hide (with --gpu)

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


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _layouts(
    base: TrainingConfig, world: int, heads: int, kv: int
) -> list[tuple[int, int, int, int]]:
    """(tp, cp, ulysses, pp) for ``world`` GPUs, the user's degrees held."""
    held = base.model_fields_set
    seq = base.seq_or_default()
    tps = (base.tp,) if "tp" in held else TP_DEGREES
    cps = (base.cp,) if "cp" in held else CP_DEGREES if seq >= CP_FROM_SEQ else (1,)
    out = []
    for tp, cp, u in itertools.product(tps, cps, _ulysses_degrees(base, seq, heads, kv)):
        if u > 1 and (tp > 1 or cp > 1):  # DeepSpeed-Ulysses runs neither beside it
            continue
        sp = tp * cp * u
        if world % sp or heads % tp or kv % tp or (seq // cp) % tp or seq % cp:
            continue
        pps = (base.pp,) if "pp" in held else _divisors(world // sp)
        out += [(tp, cp, u, pp) for pp in pps if (world // sp) % pp == 0]
    return out


def _ulysses_degrees(base: TrainingConfig, seq: int, heads: int, kv: int) -> tuple[int, ...]:
    """1, and from CP's sequence length on each degree DeepSpeed's UlyssesSPAttentionHF takes:
    dividing the heads and the sequence, dividing the key/value heads or a multiple of them
    (replicated); the user's held."""
    if "ulysses" in base.model_fields_set:
        return (base.ulysses,)
    if seq < CP_FROM_SEQ:
        return (1,)
    ok = [u for u in ULYSSES_DEGREES if not heads % u and not seq % u and not (kv % u and u % kv)]
    return (1, *ok)


def _variants(
    base: TrainingConfig, world: int, heads: int, kv: int, global_batch: int | None = None
) -> list[dict[str, Any]]:
    from profiling.fit_accum import plan_batches

    held = base.model_fields_set
    given = ((base.checkpointing, base.checkpoint_every),)
    ckpts = given if "checkpointing" in held else CHECKPOINTING
    out = []
    layouts = _layouts(base, world, heads, kv)
    for (tp, cp, u, pp), (ckpt, every) in itertools.product(layouts, ckpts):
        schedules = ((base.pp_schedule,) if "pp_schedule" in held else SCHEDULES) if pp > 1 else ()
        dp = world // (tp * cp * u * pp)
        for batch, m in plan_batches(base, global_batch, dp, pp):
            common = {"tp": tp, "cp": cp, "ulysses": u, "dp_shard": dp, "microbatches": m,
                      "checkpointing": ckpt, "checkpoint_every": every, "batch": batch}  # fmt: skip
            if pp == 1:  # microbatches: gradient accumulation (profiling.fit_accum)
                out.append({**common, "pp": 1})
                continue
            for schedule in schedules:
                out.append({**common, "pp": pp, "pp_schedule": schedule})
    return out


def _config(base: TrainingConfig, update: dict[str, Any]) -> TrainingConfig | None:
    """The candidate's configuration, validated as the command line is, or None; torchtitan's
    mixed precision unless the user gave one."""
    drop = {"gpus", "fsdp", "zero", *PLAN_FIELDS, "dp_shard"}
    values = {k: getattr(base, k) for k in base.model_fields_set if k not in drop}
    values.setdefault("precision", "mixed")
    # FSDP's fp8 all-gather has nothing to do for a candidate without FSDP
    if (update.get("dp_shard") or 1) == 1:
        values.pop("float8_all_gather", None)
    try:
        return TrainingConfig.parse(style="field", **{**values, **update})
    except (ConfigError, ValueError):
        return None


def _candidate(cfg: TrainingConfig, shape: dict[str, Any]) -> PlanCandidate:
    from profiling.estimate.comm import comm
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.report import rank_nvml

    res = estimate_plan(cfg)
    top = res.highest
    # every rank judged: the last stage's reserve holds the loss's logits, whatever its peak;
    # the estimate's own reading (its stages' layers, the loss on one microbatch's logits, what
    # runs outside the loss), so a plan fits here as `estimate` prints it
    nvml = max(rank_nvml(res, r) for r in res.ranks)
    per_gpu, compute = compute_time(cfg, shape)
    tokens = cfg.batch * cfg.seq_or_default() / (cfg.tp * cfg.cp * cfg.ulysses * cfg.pp)
    sent = comm(cfg, shape, res.params)
    speed = exposed = None
    if compute is not None:
        exposed = sent.exposed_seconds(compute) or 0.0
        speed = tokens / (compute + exposed)
    return PlanCandidate(
        config=cfg, peak_bytes=top.peak_bytes, nvml_bytes=nvml, highest_rank=top.pp_rank,
        peak_at=top.peak_at, spread_bytes=res.spread_bytes, tokens_per_second=speed,
        tokens_per_flop=tokens / per_gpu if per_gpu else 0.0,
        comm_bytes=sent.bytes, exposed_seconds=exposed,
    )  # fmt: skip


def fit_plans(
    base: TrainingConfig, world: int, async_tp: bool = False, global_batch: int | None = None
) -> PlanFit:
    """Every plan of ``world`` GPUs estimated; those that fit ranked (see the module); with
    ``async_tp`` every candidate with tensor parallelism runs it asynchronously; with
    ``global_batch`` the sequences per step over the data-parallel ranks held and each plan's
    gradient accumulation searched (``profiling.fit_accum``)."""
    from profiling.estimate.comm import GPUS_PER_NODE, PER_COMMUNICATOR, link
    from profiling.estimate.shape import shape_of
    from profiling.plans.model import plan_workload
    from profiling.plans.zbv_form import modelled as zbv_modelled
    from profiling.time_bound import checkpoint

    avail = base.gpu_mem_bytes()
    if avail is None:
        raise ProfilingError("fit needs --gpu-mem GB or --gpu NAME (the memory to fit in)")
    w = plan_workload(base)
    shape = shape_of(base)
    budget = usable(avail)
    fitting: list[PlanCandidate] = []
    smallest: PlanCandidate | None = None
    searched = 0
    if global_batch is not None and "batch" in base.model_fields_set:
        raise ProfilingError(
            "give --global-batch or --batch, not both: the global batch over the data-parallel "
            "ranks sets each rank's batch"
        )
    for update in _variants(base, world, w.heads, w.n_kv_heads, global_batch):
        checkpoint()
        cfg = _config(base, {**update, "async_tp": async_tp and update.get("tp", 1) > 1})
        if cfg is None or (cfg.pp > 1 and cfg.pp_schedule == "zbv" and not zbv_modelled(cfg)):
            continue
        try:
            cand = _candidate(cfg, shape)
        except ProfilingError:  # a split torchtitan cannot make, selective checkpointing …
            continue
        searched += 1
        if smallest is None or cand.nvml_bytes < smallest.nvml_bytes:
            smallest = cand
        if cand.nvml_bytes <= budget:
            fitting.append(cand)
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
        "ranked by estimated tokens/s per GPU"
        + (
            " with the communication compute does not hide"
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
                   without_plan=None if fitting else _without_plan(base, world))  # fmt: skip


def _without_plan(base: TrainingConfig, world: int) -> str | None:
    """When no plan fits: the best of ``fit --gpus N`` without --plans — data parallelism with
    ZeRO and DeepSpeed's optimizer offloaded to the CPU, which the plans do not search (FSDP2's
    CPUOffloadPolicy, torchtitan's enable_cpu_offload, is not modelled for a plan) — or None.
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
    return (-round(speed, 12), c.comm_bytes / tokens, c.nvml_bytes)


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
    lines.append(f"{'#':>2}  {'allocated':>9}  {'nvidia-smi':>10}  {'rank':>4}  "
                 f"{'tokens/s':>9}  {'sent/step':>9}  {'comm wait':>9}  plan")  # fmt: skip
    for i, c in enumerate(res.fitting[:top], 1):
        speed = f"{c.tokens_per_second:,.0f}" if c.tokens_per_second else "—"
        wait = f"{c.exposed_seconds * 1e3:,.1f} ms" if c.exposed_seconds is not None else "—"
        lines.append(
            f"{i:>2}  {fmt_bytes(c.peak_bytes, 'GB'):>9}  {fmt_bytes(c.nvml_bytes, 'GB'):>10}  "
            f"{c.highest_rank:>4}  {speed:>9}  {fmt_bytes(c.comm_bytes, 'GB'):>9}  {wait:>9}  "
            f"{c.label()}"
        )
    if len(res.fitting) > top:
        lines.append(f"    … {len(res.fitting) - top} more fit")
    best = res.fitting[0]
    spread = (
        f"; the ranks differ by {fmt_bytes(best.spread_bytes, 'GB')}" if best.config.pp > 1 else ""
    )
    lines.append(
        f"best: {best.label()}: {fmt_bytes(best.peak_bytes, 'GB')} allocated, "
        f"{fmt_bytes(best.nvml_bytes, 'GB')} on nvidia-smi on pipeline rank {best.highest_rank} "
        f"(at the {best.peak_at}){spread}"
    )
    lines += _decided(res.fitting)
    lines.append("trace it: journal-agent trace " + " ".join(plan_flags(best.config)))
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def _decided(fitting: list[PlanCandidate]) -> list[str]:
    """What the communication says between the best plan and the runner-up."""
    if len(fitting) < 2:
        return []
    a, b = fitting[0], fitting[1]
    line = (
        f"communication: #1 sends {fmt_bytes(a.comm_bytes, 'GB')} per GPU per step, #2 "
        f"{fmt_bytes(b.comm_bytes, 'GB')}"
    )
    if a.exposed_seconds is not None and b.exposed_seconds is not None:
        line += (
            f"; not hidden by compute: {a.exposed_seconds * 1e3:,.1f} ms against "
            f"{b.exposed_seconds * 1e3:,.1f} ms"
        )
    return [line]


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
    return {
        "label": c.label(), "peak_bytes": c.peak_bytes, "nvml_bytes": c.nvml_bytes,
        "highest_pp_rank": c.highest_rank, "peak_at": c.peak_at, "spread_bytes": c.spread_bytes,
        "tokens_per_second": c.tokens_per_second, "comm_bytes": c.comm_bytes,
        "comm_exposed_seconds": c.exposed_seconds,
        "flags": plan_flags(c.config), "config": c.config.model_dump(exclude_defaults=True),
    }  # fmt: skip


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
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=usable(res.gpu_mem_bytes), unit="B"),
    ]
    if res.smallest is not None:
        results.append(Quantity(name="smallest_nvml", value=res.smallest.nvml_bytes, unit="B"))
    for i, c in enumerate(res.fitting[:top], 1):
        name = f"#{i} {c.label()}"
        results.append(Quantity(name=f"{name}: peak", value=c.peak_bytes, unit="B"))
        results.append(Quantity(name=f"{name}: nvidia-smi", value=c.nvml_bytes, unit="B"))
        results.append(Quantity(name=f"{name}: sent per GPU per step", value=c.comm_bytes,
                                unit="B"))  # fmt: skip
        if c.exposed_seconds is not None:
            results.append(Quantity(name=f"{name}: communication not hidden",
                                    value=c.exposed_seconds, unit="s"))  # fmt: skip
        if c.tokens_per_second:
            results.append(Quantity(name=f"{name}: tokens/s", value=c.tokens_per_second,
                                    unit="tokens/s"))  # fmt: skip
    text = render_plan_fit(res, top)
    return MeasurementRecord(
        id=new_record_id("estimated"), kind="estimated",
        title=text.splitlines()[0], device={"gpu_mem_bytes": res.gpu_mem_bytes, "gpus": res.world},
        software=software_versions(), config=res.base.model_dump(), results=results,
        notes="\n".join(res.notes), extra={"table": text},
    )  # fmt: skip


__all__ = [
    "PlanCandidate", "PlanFit", "compute_time", "fit_plans",
    "plan_fit_json", "plan_fit_record", "plan_flags", "render_plan_fit",
]  # fmt: skip
