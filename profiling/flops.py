"""FLOPs of a training step in closed form, and time on a GPU at a stated MFU.

Per step of T = b·s tokens (the same ops the trace counts under ``FlopCounterMode``):

- every matmul weight W (all linear layers and the LM head; not the embedding lookup):
  2·T·|W| forward, 4·T·|W| backward — 6·M·T for M matmul weights (≈ the classic 6·N·T, with
  N counting the embeddings too);
- attention per layer: 4·b·s²·h forward (QKᵀ and AV; causal masking not discounted, as torch
  and PaLM count) and 10·b·s²·h backward for fused attention (flash's backward recomputes QKᵀ:
  five matmuls) or 8·b·s²·h for eager attention;
- full checkpointing runs every block's forward again in backward: + 2·M_blocks·T + 4·b·s²·h·L
  (≈ ×4/3).

Time = FLOPs per GPU / (peak FLOP/s × MFU); peak from ``profiling.gpus`` (16-bit tensor cores,
or plain fp32 for fp32 training). No torch here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from profiling.records import Step
from profiling.units import fmt_count


class TimeEstimate(BaseModel):
    flops_per_step: float
    flops_forward: float
    flops_backward: float
    flops_per_gpu: float
    gpu: str | None
    peak_flops: float | None
    mfu: float
    step_seconds: float | None
    tokens_per_second: float | None
    tokens: int | None
    total_seconds: float | None
    steps: list[Step]


def _fmt_seconds(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms"


def step_flops(cfg: Any, shape: dict[str, Any]) -> tuple[float, float, list[Step]] | None:
    """(forward, backward, steps) FLOPs of one step on one micro-batch, or None without a shape."""
    m, L, h = shape.get("matmul_weights"), shape.get("layers"), shape.get("hidden")
    if not (m and L and h):
        return None
    s, b = cfg.seq_or_default(), cfg.batch
    tokens = s * b
    m_blocks = int(m) - int(shape.get("head_params") or 0)
    fused = cfg.attention != "eager"
    back_attn = 10 if fused else 8
    steps = [
        Step(
            name="FLOPs: matmuls (forward 2, backward 4 per weight per token)",
            formula="6 · M · b·s  (M = matmul weights, no embedding lookup)",
            substituted=f"6 · {fmt_count(m)} · {tokens}",
            value=6 * m * tokens,
            unit="FLOP",
        ),
        Step(
            name="FLOPs: attention scores and values",
            formula=f"(4 + {back_attn}) · b·s²·h · L",
            substituted=f"{4 + back_attn} · {b}·{s}²·{h} · {L}",
            value=(4 + back_attn) * b * s * s * h * L,
            unit="FLOP",
        ),
    ]
    forward = 2 * m * tokens + 4 * b * s * s * h * L
    backward = 4 * m * tokens + back_attn * b * s * s * h * L
    if cfg.checkpointing == "full":
        again = 2 * m_blocks * tokens + 4 * b * s * s * h * L
        steps.append(
            Step(
                name="FLOPs: forward of every block again (full checkpointing)",
                formula="2 · M_blocks · b·s + 4 · b·s²·h · L",
                substituted=f"2 · {fmt_count(m_blocks)} · {tokens} + 4 · {b}·{s}²·{h} · {L}",
                value=again,
                unit="FLOP",
            )
        )
        backward += again
    steps.append(
        Step(
            name="FLOPs per step",
            formula="forward + backward",
            substituted=f"{fmt_count(forward)} + {fmt_count(backward)}",
            value=forward + backward,
            unit="FLOP",
        )
    )
    return forward, backward, steps


def time_estimate(cfg: Any, shape: dict[str, Any]) -> TimeEstimate | None:
    counted = step_flops(cfg, shape)
    if counted is None:
        return None
    forward, backward, steps = counted
    total = forward + backward
    per_gpu = total / cfg.tp  # tensor parallelism splits every matmul t ways
    if cfg.tp > 1:
        steps.append(Step(name="FLOPs per GPU", formula="FLOPs / t",
                          substituted=f"{fmt_count(total)} / {cfg.tp}", value=per_gpu,
                          unit="FLOP"))  # fmt: skip
    spec = cfg.gpu_spec()
    result = TimeEstimate(
        flops_per_step=total,
        flops_forward=forward,
        flops_backward=backward,
        flops_per_gpu=per_gpu,
        gpu=spec.key if spec else None,
        peak_flops=None,
        mfu=cfg.mfu,
        step_seconds=None,
        tokens_per_second=None,
        tokens=cfg.tokens,
        total_seconds=None,
        steps=steps,
    )
    if spec is None:
        return result
    sixteen = cfg.precision != "fp32"
    peak = spec.peak_flops(sixteen)
    step_s = per_gpu / (peak * cfg.mfu)
    tokens_step = cfg.seq_or_default() * cfg.batch * cfg.gpus
    tps = tokens_step / step_s
    rate = f"{spec.bf16_tflops:g}" if sixteen else f"{spec.fp32_tflops:g}"
    steps += [
        Step(
            name=f"Step time on {spec.name}",
            formula=f"FLOPs per GPU / ({'16-bit' if sixteen else 'fp32'} peak · MFU)",
            substituted=f"{fmt_count(per_gpu)} / ({rate}e12 · {cfg.mfu:g}) = "
            f"{_fmt_seconds(step_s)}",
            value=step_s,
            unit="s",
        ),
        Step(
            name="Tokens per second (all GPUs)",
            formula="N · b · s / step time",
            substituted=f"{cfg.gpus} · {cfg.batch} · {cfg.seq_or_default()} / {step_s:.4g} s",
            value=tps,
            unit="tokens/s",
        ),
    ]
    update: dict[str, Any] = {"peak_flops": peak, "step_seconds": step_s, "tokens_per_second": tps}
    if cfg.tokens:
        total_s = cfg.tokens / tps
        steps.append(
            Step(
                name=f"Time for {fmt_count(cfg.tokens)} tokens",
                formula="tokens / tokens per second",
                substituted=f"{fmt_count(cfg.tokens)} / {tps:,.0f} = {_fmt_seconds(total_s)}",
                value=total_s,
                unit="s",
            )
        )
        update["total_seconds"] = total_s
    return result.model_copy(update={**update, "steps": steps})


def render_time(te: TimeEstimate) -> list[str]:
    """The time lines under the memory table."""
    lines = [f"{st.name}: {st.formula} = {st.substituted}" for st in te.steps if st.unit == "FLOP"]
    lines += [f"{st.name}: {st.formula} = {st.substituted}" for st in te.steps if st.unit != "FLOP"]
    if te.gpu is None:
        lines.append("(give --gpu NAME for step time and tokens/s at --mfu, default 0.4)")
    return lines


__all__ = ["TimeEstimate", "render_time", "step_flops", "time_estimate"]
