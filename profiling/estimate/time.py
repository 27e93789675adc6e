"""FLOPs of a training step in closed form, and time on a GPU at a stated MFU.

Per step of T = b·s tokens (the same ops the trace counts under ``FlopCounterMode``):

- every matmul weight W (all linear layers and the LM head; not the embedding lookup):
  2·T·|W| forward, 4·T·|W| backward — 6·M·T for M matmul weights (≈ the classic 6·N·T, with
  N counting the embeddings too);
- attention per layer: 4·b·s²·h forward (QKᵀ and AV; causal masking not discounted, as torch
  and PaLM count) and 10·b·s²·h backward for fused attention (flash's backward recomputes QKᵀ:
  five matmuls) or 8·b·s²·h for eager attention;
- full checkpointing runs every block's forward again in backward (≈ ×4/3), except the block's
  last matmul: PyTorch's non-reentrant checkpoint stops recomputing once backward has every
  tensor it needs — + 2·(M_blocks − L·h·f)·T + 4·b·s²·h·L.

Time = FLOPs per GPU / (peak FLOP/s × MFU); peak from ``profiling.gpus`` (16-bit tensor cores,
or plain fp32 for fp32 training). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from profiling.estimate.step_time import StepTime
from profiling.estimate.throughput import job_time, optimizer_shards
from profiling.records import Step
from profiling.units import fmt_count

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


class TimeEstimate(BaseModel):
    flops_per_step: float  # one micro-batch, all tensor-parallel ranks together
    flops_forward: float
    flops_backward: float
    flops_per_gpu: float
    steps: list[Step]  # the FLOPs calculation
    time: StepTime | None  # with --gpu: step time, tokens/s, time for --tokens


def step_flops(
    cfg: TrainingConfig, shape: dict[str, Any]
) -> tuple[float, float, list[Step]] | None:
    """(forward, backward, steps) FLOPs of one step on one micro-batch, or None without a shape."""
    m, L, h = shape.get("matmul_weights"), shape.get("layers"), shape.get("hidden")
    if not (m and L and h):
        return None
    # A mixture of experts multiplies each token by the router and its k experts only; the
    # attention FLOPs scale with the query width (heads × head size, not always h).
    m = shape.get("active_matmul_weights") or m
    hq = shape.get("q_dim") or h
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
            substituted=f"{4 + back_attn} · {b}·{s}²·{hq} · {L}",
            value=(4 + back_attn) * b * s * s * hq * L,
            unit="FLOP",
        ),
    ]
    forward = 2 * m * tokens + 4 * b * s * s * hq * L
    backward = 4 * m * tokens + back_attn * b * s * s * hq * L
    if cfg.lora_rank is not None:
        # Frozen base weights need no weight gradients: backward is 2·M·T for the inputs only
        # (the rank-r adapters add 6·r·(in + out)·T, a rounding error at ranks ≤ 64).
        backward -= 2 * m * tokens
        steps[0] = steps[0].model_copy(
            update={
                "name": "FLOPs: matmuls (forward 2, backward 2: frozen weights get no gradient)",
                "formula": "4 · M · b·s",
                "substituted": f"4 · {fmt_count(m)} · {tokens}",
                "value": 4 * m * tokens,
            }
        )
    if cfg.checkpointing == "full":
        # Non-reentrant checkpointing stops recomputing once backward has every tensor it needs:
        # each block's last matmul (the MLP's down projection, h·f) is not run again.
        last = int(L) * int(h) * _last_width(shape)
        again = 2 * (m_blocks - last) * tokens + 4 * b * s * s * hq * L
        every = cfg.checkpoint_every or 1
        name = "FLOPs: every block's forward again, but its last matmul (full checkpointing)"
        formula = "2 · (M_blocks − L·h·f) · b·s + 4 · b·s²·h · L"
        sub = (f"2 · ({fmt_count(m_blocks)} − {L}·{h}·{_last_width(shape)})"
               f" · {tokens} + 4 · {b}·{s}²·{hq} · {L}")  # fmt: skip
        if every > 1:  # torchtitan's every N-th block: ⌊L/N⌋ of L blocks run again
            again = again * (int(L) // every) // int(L)
            name = f"FLOPs: 1 block in {every} run forward again, but its last matmul"
            formula, sub = f"⌊L/N⌋/L · ({formula})", f"{int(L) // every}/{L} · ({sub})"
        steps.append(Step(name=name, formula=formula, substituted=sub, value=again, unit="FLOP"))
        backward += again
    if cfg.checkpointing == "selective":
        # Korthikanti et al.'s selective recomputation (activations.py drops the scores and
        # probabilities it keeps): backward runs the attention core's forward again, QKᵀ and
        # the probabilities times V — it was counted free, so fit ranked it with no checkpointing
        again = 4 * b * s * s * hq * L
        steps.append(
            Step(
                name="FLOPs: every layer's attention scores and values again (selective "
                "checkpointing)",
                formula="4 · b·s²·h · L",
                substituted=f"4 · {b}·{s}²·{hq} · {L}",
                value=again,
                unit="FLOP",
            )
        )
        backward += again
    if cfg.checkpointing == "selective-op":
        # torchtitan's per-op policy keeps the 1st, 3rd, 5th and 7th matmul and SDPA of each
        # block (profiling.plans.op_sac): backward runs wk, wo and w3 again
        widths = int(shape.get("kv_dim") or h) + int(hq) + _last_width(shape)
        again = 2 * int(L) * int(h) * widths * tokens
        steps.append(
            Step(
                name="FLOPs: every second matmul of each block again (torchtitan's per-op "
                "selective checkpointing)",
                formula="2 · L·h·(kv + q + f) · b·s",
                substituted=f"2 · {L}·{h}·({widths}) · {tokens}",
                value=again,
                unit="FLOP",
            )
        )
        backward += again
    moved = _fused_loss_flops(cfg, shape, s, b)
    if moved is not None:
        forward, backward = forward + moved[0], backward + moved[1]
        steps.append(moved[2])
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


def _fused_loss_flops(
    cfg: TrainingConfig, shape: dict[str, Any], s: int, b: int
) -> tuple[int, int, Step] | None:
    """What a fused loss changes of the LM head's FLOPs (forward, backward, the step): Liger
    makes the head's gradients in forward (the same matmuls, moved); Cut Cross-Entropy multiplies
    only the (s − 1)·b predicting tokens, and recomputes their logits in backward."""
    head = int(shape.get("head_params") or 0)
    if cfg.loss not in ("liger", "cce") or not head:
        return None
    grads = 2 if cfg.lora_rank is None else 1  # the input's gradient, and the weight's if trained
    tokens = s * b
    if cfg.loss == "liger":
        moved = 2 * grads * head * tokens
        step = Step(
            name="FLOPs: Liger's fused loss makes the LM head's gradients in forward",
            formula=f"{2 * grads} · V·h · b·s moved from backward to forward",
            substituted=f"{2 * grads} · {fmt_count(head)} · {tokens}",
            value=moved,
            unit="FLOP",
        )
        return moved, -moved, step
    rows = (s - 1) * b
    forward = 2 * head * rows - 2 * head * tokens
    backward = 2 * (grads + 1) * head * rows - 2 * grads * head * tokens
    step = Step(
        name="FLOPs: Cut Cross-Entropy's LM head on the (s − 1)·b predicting tokens, its logits "
        "recomputed in backward",
        formula=f"2·V·h·(s − 1)·b + {2 * (grads + 1)}·V·h·(s − 1)·b − {2 + 2 * grads}·V·h·b·s",
        substituted=f"V·h = {fmt_count(head)}, (s − 1)·b = {rows}, b·s = {tokens}",
        value=forward + backward,
        unit="FLOP",
    )
    return forward, backward, step


def _last_width(shape: dict[str, Any]) -> int:
    """The inner width of a block's last matmul: the MLP's, or k experts' with MoE."""
    if shape.get("experts"):
        return int(shape["expert_ffn"]) * int(shape["experts_per_token"])
    return int(shape.get("ffn") or 4 * shape["hidden"])


def time_estimate(cfg: TrainingConfig, shape: dict[str, Any]) -> TimeEstimate | None:
    counted = step_flops(cfg, shape)
    if counted is None:
        return None
    forward, backward, steps = counted
    total = forward + backward
    per_gpu = total / cfg.tp  # tensor parallelism splits every matmul t ways
    if cfg.tp > 1:
        steps.append(
            Step(
                name="FLOPs per GPU",
                formula="FLOPs / t",
                substituted=f"{fmt_count(total)} / {cfg.tp}",
                value=per_gpu,
                unit="FLOP",
            )
        )
    # one throughput model for every configuration (profiling.estimate.throughput): fit's
    # ranking and this estimate's tokens/s are one number
    timed = job_time(cfg, shape, total)
    return TimeEstimate(
        flops_per_step=total,
        flops_forward=forward,
        flops_backward=backward,
        flops_per_gpu=per_gpu,
        steps=steps,
        time=timed,
    )


def render_time(te: TimeEstimate) -> list[str]:
    """The FLOPs and time lines under the memory table."""
    lines = [f"{st.name}: {st.formula} = {st.substituted}" for st in te.steps]
    if te.time is not None:
        from profiling.estimate.step_time import render_time as render_step_time

        lines += [
            line.replace("(from the counted FLOPs)", "(from the closed-form FLOPs above)")
            for line in render_step_time(te.time)
        ]
    else:
        lines.append("(give --gpu NAME for step time and tokens/s at --mfu, default 0.4)")
    return lines


__all__ = ["TimeEstimate", "optimizer_shards", "render_time", "step_flops", "time_estimate"]
