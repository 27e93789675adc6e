"""What fits: search the ways to train a model on a GPU size, rank those that fit by throughput.

``fit(base)`` varies, around the user's configuration (model, sequence, optimizer, GPUs): precision
(bf16, mixed, amp-bf16, fp32), ZeRO stage (with more than one GPU), activation checkpointing (none,
selective, full), what is trained (everything, LoRA r=16, QLoRA r=16), optimizer-state CPU offload,
and the micro-batch (1, 2, 4 … 64). Every candidate is estimated in closed form
(``profiling.estimate.memory``); those whose peak fits the GPU are ranked — full training first,
then LoRA, then QLoRA (they train different things), and within each by estimated tokens per second
(FLOPs per GPU at the GPU's peak × MFU; offloaded optimizer steps run on the CPU and are slower
than shown). The best few are traced under fake tensors to confirm the peak. When nothing fits, the
smallest need is reported.

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
from profiling.estimate.memory import HEADROOM, estimate
from profiling.time_bound import TimeBound, checkpoint
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.records import MeasurementRecord

BATCHES = (1, 2, 4, 8, 16, 32, 64)
# On equal throughput the order decides: the standard recipes before pure bf16.
PRECISIONS = ("mixed", "amp-bf16", "bf16", "fp32")
LORA_RANK = 16
_TIERS = {"full": 0, "lora": 1, "qlora": 2}
FIT_HINT = "give it a longer timeout, or confirm fewer candidates by trace (--confirm 0: none)"


class Candidate(BaseModel):
    config: TrainingConfig
    trains: str  # full | lora | qlora
    peak_bytes: int
    peak_moment: str
    tokens_per_second: float | None  # with a GPU from the table
    tokens_per_step_flop: float  # b·s per FLOP of one GPU's step: throughput without a GPU
    traced_peak_bytes: int | None = None
    traced_fits: bool | None = None

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


def _variants(base: TrainingConfig) -> list[dict[str, Any]]:
    zeros = (0, 1, 2, 3) if base.gpus > 1 else (0,)
    trains = ("full", "lora", "qlora") if base.lora_rank is None else ("lora",)
    out = []
    for precision, zero, ckpt, kind, offload in itertools.product(
        PRECISIONS, zeros, ("none", "selective", "full"), trains, (False, True)
    ):
        if kind != "full" and (offload or zero == 3):
            continue  # adapters are tiny: offloading or sharding them buys nothing
        if kind == "qlora" and precision == "fp32":
            continue
        update: dict[str, Any] = {
            "precision": precision,
            "zero": zero,
            "checkpointing": ckpt,
            "offload_optimizer": offload,
            "fp32_grads": False,
            "lora_rank": base.lora_rank or (LORA_RANK if kind != "full" else None),
            "qlora": kind == "qlora",
        }
        out.append(update)
    return out


def _candidate(cfg: TrainingConfig) -> Candidate:
    est = estimate(cfg)
    per_gpu = est.time.flops_per_gpu if est.time else 0.0
    timed = est.time.time if est.time else None
    kind = "full" if cfg.lora_rank is None else ("qlora" if cfg.qlora else "lora")
    return Candidate(
        config=cfg,
        trains=kind,
        peak_bytes=est.per_gpu_bytes,
        peak_moment=est.peak_moment,
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
    budget = int(avail * HEADROOM)  # ✅: leave the CUDA context and fragmentation their share
    fitting: list[Candidate] = []
    smallest: Candidate | None = None
    searched = 0
    for update in _variants(base):
        for batch in BATCHES:
            checkpoint()
            cfg = base.model_copy(update={**update, "batch": batch})
            cand = _candidate(cfg)
            searched += 1
            if smallest is None or cand.peak_bytes < smallest.peak_bytes:
                smallest = cand
            if cand.peak_bytes > budget:
                break  # a larger micro-batch needs more
            fitting.append(cand)
    assert smallest is not None
    fitting = _best_per_setup(fitting)
    fitting.sort(key=_rank_key)
    notes = [
        f"fits = peak ≤ {HEADROOM:.0%} of {fmt_bytes(avail, 'GB')} (the rest: CUDA context, "
        "allocator fragmentation, communication buffers)",
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
    _confirm(fitting, confirm, avail, progress, notes)
    return FitResult(
        base=base,
        gpu_mem_bytes=avail,
        searched=searched,
        fitting=fitting,
        smallest=smallest,
        notes=notes,
    )


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
) -> None:
    if confirm <= 0:
        return
    from profiling.trace.build import OPTIMIZERS, untraceable
    from profiling.trace.step import trace_step

    done = 0
    for cand in fitting:
        if done >= confirm:
            break
        cfg = cand.config
        if untraceable(cfg) or cfg.optimizer not in OPTIMIZERS:
            continue
        if progress:
            progress(f"tracing {cand.label()}")
        result = trace_step(cfg)
        cand.traced_peak_bytes = result.peak_bytes
        cand.traced_fits = result.peak_bytes <= avail * HEADROOM
        done += 1
    if done == 0 and fitting:
        notes.append(
            "no fitting candidate can be traced (selective checkpointing, offload, QLoRA under "
            "autocast, or LoRA without peft): estimates only"
        )


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
    if not res.fitting:
        s = res.smallest
        lines.append(
            f"Nothing fits: the smallest need is {fmt_bytes(s.peak_bytes, 'GB')} per GPU "
            f"({s.label()}), against {fmt_bytes(res.gpu_mem_bytes * HEADROOM, 'GB')} usable."
        )
        return "\n".join(lines)
    lines.append(f"{'#':>2}  {'peak':>9}  {'traced':>9}  {'tokens/s':>10}  configuration")
    for i, c in enumerate(res.fitting[:top], 1):
        traced = fmt_bytes(c.traced_peak_bytes, "GB") if c.traced_peak_bytes else "—"
        speed = f"{c.tokens_per_second:,.0f}" if c.tokens_per_second else "—"
        lines.append(
            f"{i:>2}  {fmt_bytes(c.peak_bytes, 'GB'):>9}  {traced:>9}  {speed:>10}  {c.label()}"
        )
    if len(res.fitting) > top:
        lines.append(f"    … {len(res.fitting) - top} more fit")
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def fit_json(res: FitResult) -> dict[str, Any]:
    return {
        "gpu_mem_bytes": res.gpu_mem_bytes,
        "searched": res.searched,
        "fits": bool(res.fitting),
        "fitting": [
            {
                "rank": i,
                "label": c.label(),
                "trains": c.trains,
                "peak_bytes": c.peak_bytes,
                "peak_moment": c.peak_moment,
                "tokens_per_second": c.tokens_per_second,
                "traced_peak_bytes": c.traced_peak_bytes,
                "traced_fits": c.traced_fits,
                "config": c.config.model_dump(exclude_defaults=True),
            }
            for i, c in enumerate(res.fitting, 1)
        ],
        "smallest": {
            "label": res.smallest.label(),
            "peak_bytes": res.smallest.peak_bytes,
            "config": res.smallest.config.model_dump(exclude_defaults=True),
        },
        "notes": res.notes,
    }


__all__ = ["Candidate", "FitResult", "fit", "fit_json", "render_fit"]


def fit_record(res: FitResult, top: int = 10) -> MeasurementRecord:
    """What ``fit`` prints, as a record to cite: each shown row's estimated peak, traced peak
    and tokens/s, the GPU's memory and the part of it counted as usable."""
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=res.gpu_mem_bytes * HEADROOM, unit="B"),
        Quantity(name="smallest_peak", value=res.smallest.peak_bytes, unit="B"),
    ]
    for i, c in enumerate(res.fitting[:top], 1):
        name = f"#{i} {c.label()}"
        results.append(Quantity(name=f"{name}: peak", value=c.peak_bytes, unit="B"))
        if c.traced_peak_bytes:
            results.append(
                Quantity(name=f"{name}: traced peak", value=c.traced_peak_bytes, unit="B")
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
        extra={"table": render_fit(res, top)},
    )
