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
bound does not fit or comes within ``REPLAY_WITHIN`` of it (``profiling.fit_confirm``); one
whose trace does not fit is dropped, never called "fits". When nothing fits, the smallest need
is reported.

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
from profiling.models.shape_overrides import override_note
from profiling.time_bound import TimeBound, checkpoint
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.records import Quantity

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
    tokens_per_second: float | None  # the job's, every GPU together, with a GPU from the table
    tokens_per_step_flop: float  # b·s per FLOP of one GPU's step: throughput without a GPU
    tokens_per_gpu: float | None = None  # tokens_per_second ÷ the job's GPUs
    exposed_seconds: float | None = None  # communication compute does not hide (with --gpu)
    world: int = 1  # the job's GPUs
    traced_peak_bytes: int | None = None  # allocated, traced
    traced_nvml_bytes: int | None = None  # nvidia-smi, from the trace's allocator replay
    traced_fits: bool | None = None
    host_bytes: int | None = None  # DeepSpeed's offload: host memory per node
    host_fits: bool | None = None  # against --cpu-mem
    comm_bytes: int | None = None  # sent per GPU per step (several GPUs: estimate.comm)

    @property
    def highest_rank(self) -> int | None:
        """A plan's pipeline rank of the highest peak; None: every GPU holds the same."""
        return None

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
    world: int = 0  # the job's GPUs (0: --gpus)
    plans: int = 0  # of ``searched``, the parallel plans (``profiling.fit_gpus``)
    best_lines: list[str] = []  # under the table: the best plan, its ranks, how to trace it


# The settings the search varies; one the user gave (a flag or a recipe) is held instead.
SEARCHED = ("precision", "zero", "checkpointing", "offload_optimizer", "lora_rank", "qlora")


def usable(avail: int) -> int:
    """The memory a candidate may fill: the GPU's, less the safety margin."""
    return int(avail * (1 - SAFETY_MARGIN))


def _encoder(base: TrainingConfig) -> str | None:
    """'encoder' or 't5' for the kinds whose finetunes are searched narrower, else None."""
    from profiling.models.shape_overrides import workload_of

    w = None if base.is_factory else workload_of(base)
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
    # a paged optimizer (bitsandbytes', or LitGPT's QLoRA PagedAdamW) keeps its state on the GPU:
    # beside --offload-optimizer the configuration refuses it, so no offloaded candidate
    # (fit crashed on the refusal's ValidationError)
    held_offload = "offload_optimizer" in held or base.paged_optimizer
    offloads = (base.offload_optimizer,) if held_offload else (False, True)
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
    timed = est.time.time if est.time else None  # profiling.estimate.throughput's
    kind = "full" if cfg.lora_rank is None else ("qlora" if cfg.qlora else "lora")
    host = (est.deepspeed or {}).get("host") or {}
    from profiling.estimate.throughput import job_comm, tokens_per_gpu

    sent = job_comm(cfg, est.shape)
    exposed = sent.exposed_seconds(timed.compute_seconds) if sent and timed else None
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
        tokens_per_gpu=tokens_per_gpu(timed) if timed else None,
        exposed_seconds=exposed,
        world=cfg.gpus * cfg.tp,
        tokens_per_step_flop=cfg.seq_or_default() * cfg.batch / per_gpu if per_gpu else 0.0,
    )


def rank_key(c: Candidate) -> tuple[int, bool, bool, int, int, float]:
    """Full training, then LoRA, then QLoRA; the optimizer on the GPU before offloaded; then
    faster first. Speeds within 1 % of each other are one speed: there the precision's order
    (mixed before pure bf16) and then fewer bytes sent per token decide (ZeRO-2 before ZeRO-3
    at one speed: the communication volume that decides between them), else the search's
    order (no checkpointing before some), not a byte of optimizer state."""
    speed = c.tokens_per_second if c.tokens_per_second is not None else c.tokens_per_step_flop
    # Without a GPU there is no peak to divide by: fp32 (8–16× slower matmuls) ranks last.
    slow = c.tokens_per_second is None and c.config.precision == "fp32"
    bucket = math.floor(math.log(speed) / math.log(1.01)) if speed > 0 else 0
    order = PRECISIONS.index(c.config.precision) if c.config.precision in PRECISIONS else 0
    sent = (c.comm_bytes or 0) / (c.config.batch * c.config.seq_or_default() * c.config.gpus)
    return (_TIERS[c.trains], slow, c.config.offload_optimizer, -bucket, order, sent)


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
    fitting.sort(key=rank_key)
    notes = [
        fits_note(base, avail),
        "ranked: full training, then LoRA, then QLoRA (they train different things); within "
        "each by estimated tokens/s" + ("" if base.gpu else " per step FLOP (no --gpu given)"),
    ]
    notes += [n] if (n := override_note(base)) else []  # --layers … beside --model
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
    fitting = confirm_best(fitting, confirm, avail, progress, notes)
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
    from profiling.estimate.dequant_rests import applies
    from profiling.fit_confirm import REPLAY_WITHIN

    nccl = nccl_bytes(base)
    rests = (
        "QLoRA's dequantized weights' rests and 4-bit weights' segments, " if applies(base) else ""
    )
    return (
        f"fits = what nvidia-smi would show on a GPU near full ≤ "
        f"{fmt_bytes(usable(avail), 'GB')}: {fmt_bytes(avail, 'GB')} less a "
        f"{SAFETY_MARGIN:.0%} safety margin (for what no counter models: other processes, "
        "kernels' own scratch); that is allocated + cuBLAS workspaces + what the caching "
        "allocator cannot hand back when a segment would not fit (it releases its cached "
        "segments and retries before it runs out of memory), in closed form (cached blocks "
        "between sizes in segments a live block holds, the loss's logits in segments one row "
        f"apart, {rests}mid-sized gradients alone in segments, FSDP2's streams, a partly empty "
        "segment per pool: a bound checked against the least memory replayed traces run in), "
        f"+ the {context_text(base)}"
        + (f" + NCCL {nccl / 2**20:g} MiB" if nccl else "")
        + "; a traced candidate by its traced peak under that bound, or where that does not "
        f"fit with {REPLAY_WITHIN:.0%} to spare by the least memory its own allocations replay in"
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


def confirm_best(
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
    from profiling.trace.optimizers import OPTIMIZERS
    from profiling.trace.untraceable import untraceable

    done, zero1 = 0, False
    dropped: list[Candidate] = []
    for cand in fitting:
        if done >= confirm:
            break
        cfg = cand.config
        if cfg.is_plan:  # a plan's trace is per rank ('journal-agent trace' with its flags)
            continue
        if untraceable(cfg) or cfg.optimizer not in OPTIMIZERS:
            zero1 = zero1 or (cfg.zero in (1, 2) and cfg.sharded and not cfg.fsdp)
            continue
        if progress:
            progress(f"tracing {cand.label()}")
        # DDP: a rank's step is the one-GPU step and the Reducer's buckets (trace.ddp)
        traced = confirmed(cfg, usable(avail))
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
    if fitting and fitting[0].config.is_plan:  # D42: say what the ranking's best is not
        notes.append(
            f"the best, {fitting[0].label()}, is estimated, not traced: a plan's trace is per "
            "rank (the command under the table); the traced column confirms the others"
        )
    if zero1:
        notes.append(
            "ZeRO-1 and ZeRO-2 are estimated, not traced: FSDP2, which the trace runs, has no "
            "ZeRO-1 and shards ZeRO-2's whole weights (--fsdp --zero 2 is traced)"
        )
    if done == 0 and fitting:
        notes.append(
            "no fitting candidate can be traced (offload, ZeRO-1/2, QLoRA under autocast, LoRA "
            "without peft, or selective checkpointing compiled): estimates only"
        )
    return [c for c in fitting if c not in dropped]


def searched_fields(base: TrainingConfig) -> list[str]:
    """The settings ``fit`` searched (not given, so not held), in the order it varies them."""
    varied = [f for f in ("batch", *SEARCHED) if f not in base.model_fields_set]
    return [f for f in varied if f != "zero" or base.gpus > 1]


__all__ = [
    "FIT_HINT",
    "Candidate",
    "FitResult",
    "confirm_best",
    "fit",
    "fits_note",
    "judge_quantities",
    "rank_key",
    "searched_fields",
    "usable",
]  # fmt: skip
