"""What fits: search the ways to train a model on a GPU size, rank those that fit by throughput.

``fit(base)`` varies, around the user's configuration (model, sequence, optimizer, GPUs): precision
(bf16, mixed, amp-bf16, fp32), ZeRO stage (with more than one GPU), activation checkpointing (none,
full; selective under eager attention), what is trained (everything, LoRA r=16, QLoRA r=16),
optimizer-state CPU offload, and the micro-batch (1, 2, 4 … 64). Every candidate is estimated
in closed form (``profiling.estimate.memory``); those whose peak fits the GPU are ranked — full
training first, then LoRA, then QLoRA (they train different things), and within each by tokens/s
(FLOPs per GPU at the GPU's peak × MFU, plus the optimizer step). A setting the user gave
(``--precision``, ``--lora-rank``, ``--batch`` …, or a recipe's) is held, not searched.

A candidate fits when what nvidia-smi would show on a GPU near full — what the caching allocator
must keep there (it hands its cached segments back and retries before it runs out of memory: an
upper bound in closed form), the CUDA context and NCCL's buffers (``profiling.estimate.counters``,
``Counters.must_fit``) — stays under the GPU's memory less a stated safety margin. The best few
are traced under fake tensors: their exact allocated peak, the need bounded over it in closed
form, or their allocations replayed through the allocator's model at the GPU's size where that
bound does not fit (``profiling.fit_confirm``); one whose trace does not fit is dropped, never
called "fits". When nothing fits, the smallest need is reported.

No torch unless a candidate is traced.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.estimate.render import SAFETY_MARGIN
from profiling.time_bound import TimeBound, checkpoint
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.records import MeasurementRecord, Quantity

BATCHES = (1, 2, 4, 8, 16, 32, 64)
# On equal throughput the order decides: the standard recipes before pure bf16.
PRECISIONS = ("mixed", "amp-bf16", "bf16", "fp32")
LORA_RANK = 16
_TIERS = {"full": 0, "lora": 1, "qlora": 2}
FIT_HINT = "give it a longer timeout, or confirm fewer candidates by trace (--confirm 0: none)"


class Candidate(BaseModel):
    config: TrainingConfig
    trains: str  # full | lora | qlora
    peak_bytes: int  # allocated (the step's tensors)
    peak_moment: str
    nvml_bytes: int  # what nvidia-smi would show near full (what the allocator must keep, an
    # upper bound, + context + NCCL), less
    # a paged optimizer's state, which the driver moves to the host rather than run out
    tokens_per_second: float | None  # with a GPU from the table
    tokens_per_step_flop: float  # b·s per FLOP of one GPU's step: throughput without a GPU
    traced_peak_bytes: int | None = None  # allocated, traced
    traced_nvml_bytes: int | None = None  # nvidia-smi, from the trace's allocator replay
    traced_fits: bool | None = None
    host_bytes: int | None = None  # DeepSpeed's offload: host memory per node
    host_fits: bool | None = None  # against --cpu-mem
    comm_bytes: int | None = None  # sent per GPU per step (several GPUs: estimate.comm)

    def label(self) -> str:
        c = self.config
        parts = [c.precision, f"batch {c.batch}"]
        if c.gpus > 1:
            parts.append(f"ZeRO-{c.zero}" if c.zero else "DDP")
        if c.checkpointing != "none":
            parts.append(f"{c.checkpointing} checkpointing")
        if c.lora_rank:
            parts.append(f"{'QLoRA' if c.qlora else 'LoRA'} r={c.lora_rank}")
        if c.offload_optimizer:
            parts.append("optimizer offloaded")
        return ", ".join(parts)


class FitResult(BaseModel):
    base: TrainingConfig
    gpu_mem_bytes: int
    searched: int
    fitting: list[Candidate]  # ranked, best first
    smallest: Candidate  # the smallest peak found, fitting or not
    notes: list[str]
    host_short: Candidate | None = None  # under the GPU, over --cpu-mem: the least host need


# The settings the search varies; one the user gave (a flag or a recipe) is held instead.
SEARCHED = ("precision", "zero", "checkpointing", "offload_optimizer", "lora_rank", "qlora")


def usable(avail: int) -> int:
    """The memory a candidate may fill: the GPU's, less the safety margin."""
    return int(avail * (1 - SAFETY_MARGIN))


def _encoder(base: TrainingConfig) -> str | None:
    """'encoder' or 't5' for the kinds whose finetunes are searched narrower, else None."""
    from profiling.models.workloads import find_workload

    w = None if base.is_factory else find_workload(base.model)
    return w.arch if w is not None and w.arch in ("encoder", "t5") else None


SEARCHED_CKPT = ("none", "selective", "full")


def _variants(base: TrainingConfig) -> list[dict[str, Any]]:
    held = set(base.model_fields_set) & set(SEARCHED)
    zeros = (base.zero,) if "zero" in held else (0, 1, 2, 3) if base.gpus > 1 else (0,)
    encoder = _encoder(base)  # full finetunes, no or full checkpointing (hf_encoders)
    if "lora_rank" in held:
        trains: tuple[str, ...] = ("qlora",) if base.qlora else ("lora",)
    else:
        trains = ("full",) if encoder else ("full", "lora", "qlora")
    precisions = (base.precision,) if "precision" in held else PRECISIONS
    # a T5's full finetune and LoRA under checkpointing are estimated (estimate.t5_ckpt_full,
    # estimate.t5_ckpt, t5_mlp_ckpt); selective only under eager attention: it drops the s²
    # scores a fused kernel (SDPA, flash) never keeps — else no checkpointing's row, slower
    every = ("none", "full") if encoder or base.attention != "eager" else SEARCHED_CKPT
    ckpts = (base.checkpointing,) if "checkpointing" in held else every
    offloads = (base.offload_optimizer,) if "offload_optimizer" in held else (False, True)
    out = []
    for precision, zero, ckpt, kind, offload in itertools.product(
        precisions, zeros, ckpts, trains, offloads
    ):
        if kind != "full" and (offload or zero == 3) and "lora_rank" not in held:
            continue  # adapters are tiny: offloading or sharding them buys nothing
        if kind == "qlora" and precision == "fp32":
            continue
        update: dict[str, Any] = {
            "precision": precision,
            "zero": zero,
            "checkpointing": ckpt,
            "offload_optimizer": offload,
            "lora_rank": base.lora_rank or (LORA_RANK if kind != "full" else None),
            "qlora": kind == "qlora",
        }
        if "precision" not in held:
            update["fp32_grads"] = False
        # DeepSpeed's engine: a ZeRO stage, full training, parameters offloaded only at stage 3
        if base.deepspeed and (zero == 0 or kind != "full" or (base.offload_param and zero != 3)):
            continue
        out.append(update)
    return out


def _candidate(cfg: TrainingConfig) -> Candidate:
    est = estimate(cfg)
    per_gpu = est.time.flops_per_gpu if est.time else 0.0
    timed = est.time.time if est.time else None
    kind = "full" if cfg.lora_rank is None else ("qlora" if cfg.qlora else "lora")
    host = (est.deepspeed or {}).get("host") or {}
    from profiling.estimate.comm import step_comm

    sent = step_comm(cfg, est.shape)
    return Candidate(
        comm_bytes=sent.bytes if sent is not None else None,
        host_bytes=host.get("per_node_bytes"),
        host_fits=host.get("fits"),
        config=cfg,
        trains=kind,
        peak_bytes=est.per_gpu_bytes,
        peak_moment=est.peak_moment,
        nvml_bytes=est.counters.must_fit() if est.counters else est.per_gpu_bytes,
        tokens_per_second=timed.tokens_per_second if timed else None,
        tokens_per_step_flop=cfg.seq_or_default() * cfg.batch / per_gpu if per_gpu else 0.0,
    )


def _rank_key(c: Candidate) -> tuple[int, bool, bool, int]:
    speed = c.tokens_per_second if c.tokens_per_second is not None else c.tokens_per_step_flop
    # Without a GPU there is no peak to divide by: fp32 (8–16× slower matmuls) ranks last.
    slow = c.tokens_per_second is None and c.config.precision == "fp32"
    # Speeds within 1 % of each other are one speed: the search's order (mixed before pure
    # bf16, no checkpointing before some) decides between them, not a byte of optimizer state.
    bucket = math.floor(math.log(speed) / math.log(1.01)) if speed > 0 else 0
    return (_TIERS[c.trains], slow, c.config.offload_optimizer, -bucket)


def fit(
    base: TrainingConfig,
    confirm: int = 2,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> FitResult:
    """Search, rank, and trace the best ``confirm`` fitting candidates; the search and the
    traces together within ``timeout`` seconds (:class:`~profiling.time_bound.TimedOut`)."""
    with TimeBound(timeout, f"fit of {base.model or 'the model'}", FIT_HINT):
        return _fit(base, confirm, progress)


def _fit(base: TrainingConfig, confirm: int, progress: Callable[[str], None] | None) -> FitResult:
    avail = base.gpu_mem_bytes()
    if avail is None:
        raise ProfilingError("fit needs --gpu-mem GB or --gpu NAME (the memory to fit in)")
    if base.model is None and (base.hidden is None or base.layers is None):
        raise ProfilingError("fit needs --model NAME, or --params with --layers and --hidden")
    budget = usable(avail)
    fitting: list[Candidate] = []
    smallest: Candidate | None = None
    host_short: Candidate | None = None
    searched = 0
    batches = (base.batch,) if "batch" in base.model_fields_set else BATCHES
    for update in _variants(base):
        for batch in batches:
            checkpoint()
            cfg = base.model_copy(update={**update, "batch": batch})
            cand = _candidate(cfg)
            searched += 1
            if smallest is None or cand.nvml_bytes < smallest.nvml_bytes:
                smallest = cand
            if cand.nvml_bytes > budget:
                break  # a larger micro-batch needs more
            if cand.host_fits is False:  # the host's need does not grow with the micro-batch
                if host_short is None or (cand.host_bytes or 0) < (host_short.host_bytes or 0):
                    host_short = cand
                break
            fitting.append(cand)
    assert smallest is not None
    fitting = _best_per_setup(fitting)
    fitting.sort(key=_rank_key)
    notes = [
        fits_note(base, avail),
        "ranked: full training, then LoRA, then QLoRA (they train different things); within "
        "each by estimated tokens/s" + ("" if base.gpu else " per step FLOP (no --gpu given)"),
    ]
    if fitting and fitting[0].config.precision == "bf16":
        notes.append(
            "pure bf16 keeps no fp32 master weights: small updates can round away "
            "(use stochastic rounding or Kahan summation), which is why mixed is preferred"
        )
    if any(c.config.offload_optimizer for c in fitting):
        notes.append(
            "offloaded optimizer steps run on the CPU: their tokens/s count the PCIe transfers "
            "and the host's step at an assumed 50 GB/s of host memory per GPU"
            if base.gpu
            else "offloaded optimizer steps run on the CPU: slower, ranked after the same "
            "setup on the GPU (give --gpu for tokens/s that count the transfers)"
        )
    held = sorted(set(base.model_fields_set) & {*SEARCHED, "batch"})
    if held:
        notes.append("held as given, not searched: " + ", ".join(held))
    fitting = _confirm(fitting, confirm, avail, progress, notes)
    return FitResult(
        base=base,
        gpu_mem_bytes=avail,
        searched=searched,
        fitting=fitting,
        smallest=smallest,
        notes=notes,
        host_short=host_short,
    )


def fits_note(base: TrainingConfig, avail: int) -> str:
    """How a candidate is judged, every term named."""
    from profiling.estimate.comm import nccl_bytes
    from profiling.estimate.counters import context_text

    nccl = nccl_bytes(base)
    return (
        f"fits = what nvidia-smi would show on a GPU near full ≤ "
        f"{fmt_bytes(usable(avail), 'GB')}: {fmt_bytes(avail, 'GB')} less a "
        f"{SAFETY_MARGIN:.0%} safety margin (for what no counter models: other processes, "
        "kernels' own scratch); that is allocated + cuBLAS workspaces + what the caching "
        "allocator cannot hand back when a segment would not fit (it releases its cached "
        "segments and retries before it runs out of memory), in closed form (cached blocks "
        "between sizes in segments a live block holds, the loss's logits in segments one row "
        "apart, mid-sized gradients alone in segments, FSDP2's streams, a partly empty segment "
        "per pool: a bound checked against the least memory replayed traces run in), "
        f"+ the {context_text(base)}"
        + (f" + NCCL {nccl / 2**20:g} MiB" if nccl else "")
        + "; a traced candidate by its traced peak under that bound, or where that does not "
        "fit by the least memory its own allocations replay in"
    )


def judge_quantities(base: TrainingConfig) -> list[Quantity]:
    """The terms ``fits_note`` prints, so each can be cited."""
    from profiling.estimate.comm import nccl_bytes
    from profiling.estimate.counters import context, context_label
    from profiling.estimate.reserve import SEGMENT_SLACK
    from profiling.records import Quantity

    out = [
        Quantity(name=context_label(base), value=context(base), unit="B"),
        Quantity(name="a partly empty segment of each pool", value=SEGMENT_SLACK, unit="B"),
    ]
    if nccl_bytes(base):
        out.append(Quantity(name="NCCL buffers (assumed)", value=nccl_bytes(base), unit="B"))
    return out


def _best_per_setup(cands: list[Candidate]) -> list[Candidate]:
    """Of each setup (all but the batch) keep the largest micro-batch that fits."""
    best: dict[str, Candidate] = {}
    for c in cands:
        key = c.label().replace(f"batch {c.config.batch}", "")
        if key not in best or c.config.batch > best[key].config.batch:
            best[key] = c
    return list(best.values())


def _confirm(
    fitting: list[Candidate],
    confirm: int,
    avail: int,
    progress: Callable[[str], None] | None,
    notes: list[str],
) -> list[Candidate]:
    """Trace the best ``confirm`` candidates (``profiling.fit_confirm``: the exact peak, the
    need bounded over it or replayed): one whose nvidia-smi need does not fit is dropped and
    said, never kept as fitting. Returns the candidates that still fit."""
    if confirm <= 0:
        return fitting
    from profiling.fit_confirm import BOUND_NOTE, confirmed
    from profiling.trace.build import OPTIMIZERS
    from profiling.trace.untraceable import untraceable

    done, zero1 = 0, False
    dropped: list[Candidate] = []
    for cand in fitting:
        if done >= confirm:
            break
        cfg = cand.config
        if untraceable(cfg) or cfg.optimizer not in OPTIMIZERS:
            zero1 = zero1 or (cfg.zero == 1 and cfg.sharded)
            continue
        if progress:
            progress(f"tracing {cand.label()}")
        # DDP replicates everything: a rank's step is the one-GPU step (the trace says so and
        # refuses --gpus N without sharding, profiling.trace.build._traceable)
        ddp = cfg.gpus > 1 and not (cfg.fsdp or cfg.sharded)
        traced = confirmed(cfg.model_copy(update={"gpus": 1}) if ddp else cfg, usable(avail))
        cand.traced_peak_bytes, cand.traced_nvml_bytes = traced.peak_bytes, traced.must_fit
        cand.traced_fits = traced.must_fit <= usable(avail)
        if not cand.traced_fits:
            dropped.append(cand)
        done += 1
    for cand in dropped:
        notes.append(
            f"{cand.label()}: estimated to fit, but its trace needs "
            f"{fmt_bytes(cand.traced_nvml_bytes or 0, 'GB')} on nvidia-smi: dropped"
        )
    notes += [BOUND_NOTE] if done else []
    if zero1:
        notes.append("ZeRO-1 is estimated, not traced: FSDP2, which the trace runs, has no ZeRO-1")
    if done == 0 and fitting:
        notes.append(
            "no fitting candidate can be traced (selective checkpointing, offload, ZeRO-1, QLoRA "
            "under autocast, or LoRA without peft): estimates only"
        )
    return [c for c in fitting if c not in dropped]


def render_fit(res: FitResult, top: int = 10) -> str:
    b = res.base
    name = b.model or f"{b.params} parameters"
    head = (
        f"What fits: {name}, seq {b.seq_or_default()}, {b.optimizer}, {b.gpus} GPU"
        + ("s" if b.gpus > 1 else "")
        + f" of {fmt_bytes(res.gpu_mem_bytes, 'GB')}"
        + (f" ({b.gpu})" if b.gpu else "")
        + f", target {b.target} — {res.searched} configurations estimated"
    )
    lines = [head, ""]
    if not res.fitting and res.host_short is not None:
        h = res.host_short
        lines.append(
            f"Nothing fits: {h.label()} fits the GPU ({fmt_bytes(h.nvml_bytes, 'GB')} on "
            f"nvidia-smi), but DeepSpeed's offload needs {fmt_bytes(h.host_bytes or 0, 'GB')} of "
            f"host memory per node, over --cpu-mem {res.base.cpu_mem or 0:g} GB."
        )
        lines += [f"note: {n}" for n in res.notes[:1]]
        return "\n".join(lines)
    if not res.fitting:
        s = res.smallest
        lines.append(
            f"Nothing fits: the smallest need is {fmt_bytes(s.nvml_bytes, 'GB')} on nvidia-smi "
            f"({fmt_bytes(s.peak_bytes, 'GB')} allocated) per GPU ({s.label()}), against "
            f"{fmt_bytes(usable(res.gpu_mem_bytes), 'GB')} usable."
        )
        lines += [f"note: {n}" for n in res.notes[:1]]
        return "\n".join(lines)
    sent = any(c.comm_bytes for c in res.fitting)  # several GPUs: what each sends per step
    lines.append(
        f"{'#':>2}  {'allocated':>9}  {'nvidia-smi':>10}  {'traced':>9}  {'tokens/s':>10}  "
        + (f"{'sent/step':>9}  " if sent else "")
        + "configuration"
    )
    for i, c in enumerate(res.fitting[:top], 1):
        traced = fmt_bytes(c.traced_nvml_bytes, "GB") if c.traced_nvml_bytes else "—"
        speed = f"{c.tokens_per_second:,.0f}" if c.tokens_per_second else "—"
        volume = f"{fmt_bytes(c.comm_bytes or 0, 'GB'):>9}  " if sent else ""
        lines.append(
            f"{i:>2}  {fmt_bytes(c.peak_bytes, 'GB'):>9}  {fmt_bytes(c.nvml_bytes, 'GB'):>10}  "
            f"{traced:>9}  {speed:>10}  {volume}{c.label()}"
        )
    if len(res.fitting) > top:
        lines.append(f"    … {len(res.fitting) - top} more fit")
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def fit_json(res: FitResult) -> dict[str, Any]:
    return {
        "gpu_mem_bytes": res.gpu_mem_bytes,
        "usable_bytes": usable(res.gpu_mem_bytes),
        "safety_margin": SAFETY_MARGIN,
        "searched": res.searched,
        "fits": bool(res.fitting),
        "fitting": [
            {
                "rank": i,
                "label": c.label(),
                "trains": c.trains,
                "peak_bytes": c.peak_bytes,
                "peak_moment": c.peak_moment,
                "nvml_bytes": c.nvml_bytes,
                "tokens_per_second": c.tokens_per_second,
                "comm_bytes_per_step": c.comm_bytes,
                "traced_peak_bytes": c.traced_peak_bytes,
                "traced_nvml_bytes": c.traced_nvml_bytes,
                "traced_fits": c.traced_fits,
                "config": c.config.model_dump(exclude_defaults=True),
            }
            for i, c in enumerate(res.fitting, 1)
        ],
        "smallest": {
            "label": res.smallest.label(),
            "peak_bytes": res.smallest.peak_bytes,
            "nvml_bytes": res.smallest.nvml_bytes,
            "config": res.smallest.config.model_dump(exclude_defaults=True),
        },
        "notes": res.notes,
    }


__all__ = ["Candidate", "FitResult", "fit", "fit_json", "render_fit", "usable"]


def fit_record(res: FitResult, top: int = 10) -> MeasurementRecord:
    """What ``fit`` prints, as a record to cite: each shown row's estimated peak, traced peak
    and tokens/s, the GPU's memory and the part of it counted as usable."""
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=usable(res.gpu_mem_bytes), unit="B"),
        Quantity(name="smallest_peak", value=res.smallest.peak_bytes, unit="B"),
        Quantity(name="smallest_nvml", value=res.smallest.nvml_bytes, unit="B"),
        *(
            [
                Quantity(name="host_short: nvidia-smi", value=h.nvml_bytes, unit="B"),
                Quantity(name="host_short: host per node", value=h.host_bytes or 0, unit="B"),
            ]
            if (h := res.host_short) is not None
            else []
        ),
        *judge_quantities(res.base),
    ]
    for i, c in enumerate(res.fitting[:top], 1):
        name = f"#{i} {c.label()}"
        results.append(Quantity(name=f"{name}: peak", value=c.peak_bytes, unit="B"))
        results.append(Quantity(name=f"{name}: nvidia-smi", value=c.nvml_bytes, unit="B"))
        if c.traced_peak_bytes:
            results.append(
                Quantity(name=f"{name}: traced peak", value=c.traced_peak_bytes, unit="B")
            )
        if c.traced_nvml_bytes:
            results.append(
                Quantity(name=f"{name}: traced nvidia-smi", value=c.traced_nvml_bytes, unit="B")
            )
        if c.tokens_per_second:
            results.append(
                Quantity(name=f"{name}: tokens/s", value=c.tokens_per_second, unit="tokens/s")
            )
    return MeasurementRecord(
        id=new_record_id("estimated"),
        kind="estimated",
        title=f"What fits: {render_fit(res, top).splitlines()[0].removeprefix('What fits: ')}",
        device={"gpu_mem_bytes": res.gpu_mem_bytes, "gpus": res.base.gpus},
        software=software_versions(),
        config=res.base.model_dump(),
        results=results,
        notes="\n".join(res.notes),
        # What the search varied: the configuration's values of these are only its defaults.
        extra={"table": render_fit(res, top), "searched": searched_fields(res.base)},
    )


def searched_fields(base: TrainingConfig) -> list[str]:
    """The settings ``fit`` searched (not given, so not held), in the order it varies them."""
    varied = [f for f in ("batch", *SEARCHED) if f not in base.model_fields_set]
    return [f for f in varied if f != "zero" or base.gpus > 1]
