"""Time from FLOPs: a training step on a GPU from the table, at a stated MFU, every step shown.

    step time  = FLOPs per step per GPU / (peak FLOP/s × MFU)
    tokens/s   = tokens per step per GPU × GPUs / step time
    total time = tokens to train / tokens/s

The FLOPs are what the step runs (the trace counts them op by op); MFU — model FLOPs
utilization — is the fraction of the datasheet peak a real run sustains (35–50 % is typical of
well-tuned dense training; 40 % by default). Matmuls in 16-bit (autocast, mixed, bf16) run at
the 16-bit tensor-core peak; fp32 training at the plain fp32 peak, PyTorch's default (TF32 is
off for matmuls). Pure Python, no torch.
"""

from __future__ import annotations

from pydantic import BaseModel

from profiling.gpus import GpuSpec
from profiling.records import Step
from profiling.units import fmt_count


class StepTime(BaseModel):
    gpu: str
    peak_flops: float  # FLOP/s, the datasheet's
    sixteen_bit: bool
    mfu: float
    flops_per_step: int  # per GPU
    tokens_per_step: int  # per GPU
    gpus: int
    step_seconds: float
    tokens_per_second: float  # all GPUs together
    tokens: int | None = None
    total_seconds: float | None = None
    steps: list[Step]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def step_time(
    flops_per_step: int,
    tokens_per_step: int,
    gpu: GpuSpec,
    mfu: float,
    sixteen_bit: bool,
    gpus: int = 1,
    tokens: int | None = None,
) -> StepTime:
    """Step time, throughput and (with ``tokens``) total time; each line of the sum shown."""
    peak = gpu.peak_flops(sixteen_bit)
    kind = "16-bit tensor-core" if sixteen_bit else "fp32"
    seconds = flops_per_step / (peak * mfu)
    rate = tokens_per_step * gpus / seconds
    steps = [
        Step(
            name=f"peak {kind} FLOP/s of one {gpu.name}",
            formula="datasheet, dense",
            substituted=f"{peak / 1e12:g}e12",
            value=peak,
            unit="FLOP/s",
        ),
        Step(
            name="step time",
            formula="FLOPs per step / (peak × MFU)",
            substituted=f"{fmt_count(flops_per_step)} / ({peak / 1e12:g}e12 × {mfu:g})",
            value=seconds,
            unit="s",
        ),
        Step(
            name="tokens per second" + (f" ({gpus} GPUs)" if gpus > 1 else ""),
            formula="tokens per step per GPU × GPUs / step time",
            substituted=f"{tokens_per_step} × {gpus} / {seconds:.4g}",
            value=rate,
            unit="tokens/s",
        ),
    ]
    total = None
    if tokens is not None:
        total = tokens / rate
        steps.append(
            Step(
                name=f"time for {fmt_count(tokens)} tokens",
                formula="tokens / tokens per second",
                substituted=f"{tokens} / {rate:.4g}",
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
        value = _duration(s.value) if s.unit == "s" else f"{s.value:.4g} {s.unit}"
        lines.append(f"  {s.name}: {s.formula} = {s.substituted} → {value}")
    return lines
