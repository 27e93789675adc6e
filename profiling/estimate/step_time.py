"""Time from FLOPs: a training step on a GPU from the table, at a stated MFU, every step shown.

    compute    = FLOPs per step per GPU / (peak FLOP/s × MFU)
    step time  = compute + the optimizer step (+ the offloaded step's transfers and CPU work)
                 + the communication compute does not hide (several GPUs, ``estimate.comm``)
    tokens/s   = tokens per step per replica × data-parallel replicas / step time
    total time = tokens to train / tokens/s

The FLOPs are what the step runs (the trace counts them op by op); MFU — model FLOPs
utilization — is the fraction of the datasheet peak a real run sustains (35–50 % is typical of
well-tuned dense training; 40 % by default). Matmuls in 16-bit (autocast, mixed, bf16) run at
the 16-bit tensor-core peak; fp32 training at the plain fp32 peak, PyTorch's default (TF32 is
off for matmuls).

The optimizer step does almost no arithmetic: it reads and writes every trained parameter's
weights, gradient and state once, so it takes the bytes it touches over the memory bandwidth
(the datasheet's, a lower bound), whatever the micro-batch; a larger micro-batch spreads it over
more tokens. An optimizer offloaded to the CPU (ZeRO-Offload) moves the gradients down and the
updated weights up over PCIe and steps on the host; neither is assumed hidden behind the GPU's
work. Tensor parallelism splits one replica's step over t GPUs: the job uses N·t GPUs and
processes N micro-batches per step. Pure Python, no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from profiling.gpus import GpuSpec
from profiling.records import Step
from profiling.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.comm import Comm

# An offloaded optimizer steps in host memory: a server's DDR (about 400 GB/s over two sockets)
# shared by its 8 GPUs' ranks. An assumption, stated wherever it is used.
HOST_BANDWIDTH_PER_GPU = 50e9


class StepTime(BaseModel):
    gpu: str
    peak_flops: float  # FLOP/s, the datasheet's
    sixteen_bit: bool
    mfu: float
    flops_per_step: int  # per GPU
    tokens_per_step: int  # per data-parallel replica
    gpus: int  # data-parallel replicas N
    tp: int = 1  # tensor-parallel degree t: the job uses N·t GPUs
    compute_seconds: float = 0.0  # FLOPs at the peak × MFU
    step_seconds: float
    tokens_per_second: float  # all GPUs together
    tokens: int | None = None
    total_seconds: float | None = None
    steps: list[Step]


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    days = seconds / 86400
    return f"{days:.3g} days" if days < 1000 else f"{days:,.0f} days"


def _number(x: float) -> str:
    """Four significant digits, never an exponent: 0.1123, 64,870, 1,234,567."""
    if float(x).is_integer() or abs(x) >= 1000:
        return f"{x:,.0f}"
    digits = max(0, 3 - int(f"{abs(x):e}".split("e")[1]))
    return f"{x:,.{digits}f}"


def rate_text(value: float, unit: str) -> str:
    """A rate as people read it: '64,870 tokens/s', '989T FLOP/s'."""
    if unit == "FLOP/s":
        return f"{fmt_count(value)} FLOP/s"
    if unit == "s":
        return _duration(value)
    return f"{_number(value)} {unit}".strip()


def optimizer_overheads(
    cfg: TrainingConfig, trained: float, gpu: GpuSpec, sharded_over: int = 1
) -> list[Step]:
    """The optimizer step's seconds (``trained`` parameters stepped, ``sharded_over`` ranks
    sharing them): on the GPU the bytes it touches over the memory bandwidth; offloaded, the
    PCIe transfers and the host's step."""
    from profiling._config_lora import trains_16bit
    from profiling.estimate.states import optimizer_states, weight_bytes

    per = trained / sharded_over
    adapters = 2 if trains_16bit(cfg) else 4  # LoRA's adapters: fp32 unless pure bf16
    w = weight_bytes(cfg.precision) if cfg.lora_rank is None else adapters
    g = w + (4 if cfg.fp32_grads else 0)
    master = 4 if cfg.precision == "mixed" and cfg.lora_rank is None else 0
    states = sum(b for _, b, _ in optimizer_states(cfg.optimizer, cfg.precision, None))
    share = f"{fmt_count(trained)}" + (f" / {sharded_over}" if sharded_over > 1 else "")
    if not cfg.offload_optimizer:
        touched = 2 * (w + master + states) + g
        seconds = per * touched / (gpu.bandwidth_tbs * 1e12)
        return [
            Step(
                name="optimizer step (memory-bound: every trained weight, gradient and state "
                "read once, weights and state written once, at the datasheet bandwidth)",
                formula="trained parameters per GPU · (2·(weights + master + states) + "
                "gradient) B / memory bandwidth",
                substituted=f"{share} · (2·({w} + {master} + {_number(states)}) + {g}) / "
                f"{gpu.bandwidth_tbs:g} TB/s",
                value=seconds,
                unit="s",
            )
        ]
    pcie = gpu.pcie_gbs * 1e9
    host = 2 * (4 + states) + 4  # fp32 master and states read and written, fp32 gradient read
    return [
        Step(
            name="PCIe transfers (the offloaded optimizer's gradients to the CPU and weights "
            "back, not overlapped)",
            formula="trained parameters per GPU · (gradient + weights) B / PCIe bandwidth",
            substituted=f"{share} · ({g} + {w}) / {gpu.pcie_gbs:g} GB/s",
            value=per * (g + w) / pcie,
            unit="s",
        ),
        Step(
            name="host optimizer step (memory-bound, assumed "
            f"{fmt_bytes(HOST_BANDWIDTH_PER_GPU, 'GB')}/s per GPU: a server's DDR shared by 8 "
            "GPUs)",
            formula="trained parameters per GPU · (2·(4 + states) + 4) B / host bandwidth",
            substituted=f"{share} · {_number(host)} / {HOST_BANDWIDTH_PER_GPU / 1e9:g} GB/s",
            value=per * host / HOST_BANDWIDTH_PER_GPU,
            unit="s",
        ),
    ]


def step_time(
    flops_per_step: int,
    tokens_per_step: int,
    gpu: GpuSpec,
    mfu: float,
    sixteen_bit: bool,
    gpus: int = 1,
    tokens: int | None = None,
    tp: int = 1,
    overheads: list[Step] | None = None,
    comm: Comm | None = None,
    split: str = "TP",
) -> StepTime:
    """Step time, throughput and (with ``tokens``) total time; each line of the sum shown.

    ``flops_per_step`` is one GPU's; ``tokens_per_step`` one data-parallel replica's (its
    micro-batch, shared by its ``tp`` tensor-parallel GPUs); ``overheads`` are steps in seconds
    added to the compute (the optimizer step, :func:`optimizer_overheads`); ``comm``, what one
    GPU sends per step over its links, adds what of it the compute does not hide — the step
    waits for it, so it is part of the step's time and of the ranking by tokens/s; ``split``
    names what splits a replica over its ``tp`` GPUs (a plan's: "model-parallel")."""
    peak = gpu.peak_flops(sixteen_bit)
    kind = "16-bit tensor-core" if sixteen_bit else "fp32"
    compute = flops_per_step / (peak * mfu)
    extra = list(overheads or [])
    exposed = comm.exposed_seconds(compute) if comm is not None else None
    if comm is not None and exposed:
        behind = sum(t.seconds or 0.0 for t in comm.transfers if t.overlapped)
        waited = sum(t.seconds or 0.0 for t in comm.transfers if not t.overlapped)
        extra.append(
            Step(
                name=f"communication not hidden by compute ({fmt_bytes(comm.bytes)} sent)",
                formula="waited-for transfers + max(0, overlapped transfers − compute)",
                substituted=f"{_number(waited)} + max(0, {_number(behind)} − {_number(compute)})",
                value=exposed,
                unit="s",
            )
        )
    seconds = compute + sum(st.value for st in extra)
    rate = tokens_per_step * gpus / seconds
    steps = [
        Step(
            name=f"peak {kind} FLOP/s of one {gpu.name}",
            formula="datasheet, dense",
            substituted=f"{fmt_count(peak)} FLOP/s",
            value=peak,
            unit="FLOP/s",
        ),
        Step(
            name="compute time" if extra else "step time",
            formula="FLOPs per step / (peak × MFU)",
            substituted=f"{fmt_count(flops_per_step)} / ({fmt_count(peak)} × {mfu:g})",
            value=compute,
            unit="s",
        ),
        *extra,
    ]
    if extra:
        steps.append(
            Step(
                name="step time",
                formula=" + ".join(["compute", *(st.name.split(" (")[0] for st in extra)]),
                substituted=" + ".join(_number(x) for x in [compute, *(st.value for st in extra)]),
                value=seconds,
                unit="s",
            )
        )
    job = gpus * tp
    if tp > 1:
        who = f" ({gpus} replica{'s' if gpus > 1 else ''} × {split} {tp} = {job} GPUs)"
        formula = "tokens per step per replica × replicas / step time"
    else:
        who = f" ({gpus} GPUs)" if gpus > 1 else ""
        formula = "tokens per step per GPU × GPUs / step time"
    steps.append(
        Step(
            name="tokens per second" + who,
            formula=formula,
            substituted=f"{tokens_per_step} × {gpus} / {_number(seconds)}",
            value=rate,
            unit="tokens/s",
        )
    )
    total = None
    if tokens is not None:
        total = tokens / rate
        steps.append(
            Step(
                name=f"time for {fmt_count(tokens)} tokens",
                formula="tokens / tokens per second",
                substituted=f"{tokens} / {_number(rate)}",
                value=total,
                unit="s",
            )
        )
    return StepTime(
        gpu=gpu.key,
        peak_flops=peak,
        sixteen_bit=sixteen_bit,
        mfu=mfu,
        flops_per_step=flops_per_step,
        tokens_per_step=tokens_per_step,
        gpus=gpus,
        tp=tp,
        compute_seconds=compute,
        step_seconds=seconds,
        tokens_per_second=rate,
        tokens=tokens,
        total_seconds=total,
        steps=steps,
    )


def render_time(t: StepTime) -> list[str]:
    """The calculation as text lines, one per step."""
    lines = [f"Time on {t.gpu} at {t.mfu:.0%} MFU (from the counted FLOPs):"]
    for s in t.steps:
        value = rate_text(s.value, s.unit)
        lines.append(f"  {s.name}: {s.formula} = {s.substituted} → {value}")
    return lines
