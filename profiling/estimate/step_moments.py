"""The moments of a training step, gathered from the estimate's lines (``memory.estimate``'s
ledger): what is alive at each, summed; the peak is the largest. Each architecture's own moments
come from its module (``encoder``, ``bloom`` for GPT-NeoX's kind, ``llama_end`` and
``llama_dequant`` for Llama's, ``t5_ckpt``), the loss's from ``losses``, the recomputed
block's from ``recomputed`` and ``recomputed_eager``, sharding's from ``fsdp``. No torch here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from profiling.config import TrainingConfig
from profiling.estimate import activations as acts
from profiling.estimate import (
    compiled_backward,
    ddp_unused,
    encoder,
    encoder_embeddings,
    falcon_eager_forward,
    gpt2_end,
    head_adapter_forward,
    llama_dequant,
    llama_eager_softmax,
    llama_end,
    llama_first_gate,
    llama_first_mlp,
    llama_first_norm,
    losses,
    neox_embedding,
    neox_first_block,
    neox_qkv,
    preference,
    selective_eager,
    t5,
    t5_first_mlp,
    t5_first_mlp_amp,
    t5_forward_amp,
    t5_forward_down,
    t5_last_mlp,
)
from profiling.estimate import lora as lora_acts
from profiling.estimate import step_inputs as step_in
from profiling.estimate.ddp import held as ddp_held
from profiling.estimate.ddp import viewed
from profiling.estimate.fsdp import fsdp_moments, fsdp_parts
from profiling.estimate.fsdp_lora_moments import lora_forward
from profiling.estimate.fsdp_lora_neox import last_block_held
from profiling.estimate.ledger import Line
from profiling.estimate.recomputed import recomputed_moment
from profiling.estimate.recomputed_eager import moment as eager_recomputed
from profiling.estimate.states import in_backward_step
from profiling.estimate.step_scalars import LOSS, LOSS_SCALARS
from profiling.estimate.t5_ckpt import t5_moments
from profiling.units import fmt_bytes


class Moment(BaseModel):
    """One moment of the step and what is alive then."""

    name: str
    bytes: int
    calculation: str


def step_moments(
    est_lines: list[Line],
    inp: TrainingConfig,
    shape: dict[str, Any],
    recompute: float,
    loss: losses.LossPlan | None = None,
) -> list[Moment]:
    """Every moment of the step the closed form counts, from the estimate's lines: the end of
    forward, each architecture's own (``encoder``, ``bloom``, ``llama_end``, ``t5_ckpt``), the
    loss's, the recomputed block's, GPT-2's tied end of backward, the optimizer step (or the
    step in backward) and FSDP's and torchao NF4's, in the step's order."""

    def total(*categories: str) -> float:
        return sum(ln.bytes for ln in est_lines if ln.category in categories)

    weights, grads = total("parameters"), total("gradients")
    states, act = total("optimizer"), total("activations")
    kept = grads if inp.grads_kept else 0.0
    d = t5.logit_dims(acts.dims_of(shape, inp.seq_or_default(), inp.batch))  # T5: t tokens
    head = encoder.head_transient(d, inp.precision) if d is not None else None
    f = fmt_bytes
    # the step's inputs, the whole step: an encoder's and its buffers, or a decoder's tokens
    held = encoder.step_inputs(d, inp) or step_in.token_inputs(d, inp)
    inputs, hold = (held.bytes, f" + {held.name} {fmt_bytes(held.bytes)}") if held else (0.0, "")
    fwd = weights + states + kept + act + inputs
    moments = [
        Moment(
            name="end of forward",
            bytes=round(fwd),
            calculation=f"weights {f(weights)} + optimizer {f(states)}"
            + (f" + gradients kept {f(kept)}" if kept else "")
            + f" + activations {f(act)}{hold}",
        )
    ]
    moments += [
        Moment(name=n, bytes=round(b), calculation=c)
        for n, b, c in encoder.moments(d, inp, fwd)
        + last_block_held(inp, shape, d, fwd)
        + neox_qkv.moments(d, inp, fwd)
        + llama_end.moments(d, inp, fwd, est_lines)
        + llama_eager_softmax.moments(d, inp, fwd, est_lines)
        + gpt2_end.moments(d, inp, fwd, shape, est_lines)
        + llama_dequant.moments(d, inp, fwd, est_lines)
        + llama_first_mlp.moments(d, inp, fwd, est_lines)
        + compiled_backward.moments(d, inp, fwd, est_lines)
        + t5_moments(d, inp, fwd)
        + t5_last_mlp.moments(d, inp, fwd)
        + t5_forward_amp.moments(d, inp, fwd)
        + t5_forward_down.moments(d, inp, fwd)
        + t5_first_mlp.moments(d, inp, fwd, est_lines)
        + t5_first_mlp_amp.moments(d, inp, fwd, est_lines)
        + ddp_unused.sink_moments(d, inp, fwd, est_lines)
        + head_adapter_forward.moments(d, inp, fwd, est_lines)
        + falcon_eager_forward.moments(d, inp, fwd, est_lines)
        + selective_eager.moments(d, inp, fwd, est_lines)
    ]
    cache = acts.autocast_cache(inp, shape) + losses.bias_copies(inp, shape)
    if loss is not None:
        after = losses.after_loss(inp, shape, est_lines, fwd, loss)
        for name, value, calc in losses.moments(inp, shape, fwd, cache, loss, after):
            moments.append(Moment(name=name, bytes=round(value), calculation=calc))
    if inp.dpo and d is not None and loss is not None:  # the reference's no_grad block
        from profiling.estimate import block_terms

        full = inp.model_copy(update={"lora_rank": None, "qlora": False, "lora_targets": []})
        layer = sum(t.bytes for t in block_terms.per_layer(d, acts.Bytes.of(inp.precision), full))
        for name, value, calc in preference.block_moment(d, inp, fwd, loss.looped, layer):
            moments.append(Moment(name=name, bytes=round(value), calculation=calc))
    moments += _teacher_block(d, inp, fwd, loss)  # --kd-teacher: the teacher's no_grad block
    padded, pad_calc, gone, gone_calc = step_in.shifted_labels(d, est_lines)  # transformers' loss
    if loss is None and head is not None:
        value = head.bytes / inp.tp
        moments.append(
            Moment(
                name="loss backward",
                bytes=round(fwd - gone + value),
                calculation=f"end of forward{gone_calc} + {head.formula} = {f(fwd)} + "
                f"{head.substituted}" + (f" − {round(gone)}" if gone else ""),
            )
        )
    if d is not None and d.V is not None and loss is None and encoder.lm_logits(d):
        # The loss: the logits (compute dtype) and their fp32 copy live beside the log-softmax
        # output for a moment; under autocast with checkpointing, so does autocast's cache.
        c = acts.Bytes.of(inp.precision).c
        per = c + (4 if c != 4 and (d.arch not in ("encoder", "t5") or inp.autocast) else 0)
        logits = d.s * d.b * d.V * per / inp.tp
        out = encoder.output_held(d, inp)  # masked LM's last hidden state, while its loss runs
        last = _last_output_held(d, inp)
        norm_out = gpt2_end.norm_output_held(d, inp)
        moments.append(
            Moment(
                name="loss forward",
                bytes=round(
                    fwd + cache + logits + (out.bytes if out else 0) + padded + last + norm_out
                ),
                calculation=f"end of forward + logits and their fp32 copy s·b·V·({c}"
                + (" + 4" if c != 4 else "")
                + f") B {f(logits)}{pad_calc}"
                + (
                    f" + autocast's cached 16-bit copies of the trained weights or biases "
                    f"{f(cache)} (held until autocast exits, though nothing saves them)"
                    if cache
                    else ""
                )
                + (f" + {out.name} {out.formula} {f(out.bytes)}" if out else "")
                + (f" + the last block's 16-bit output, held to the loss's end {f(last)}"
                   if last else "")
                + (f" + the final LayerNorm's fp32 output, held to the loss's end s·b·h·4 B "
                   f"{f(norm_out)}" if norm_out else ""),
            )
        )  # fmt: skip
    if recompute:  # exact where modelled, else the end of forward's bound (estimate.recomputed)
        n, b, c = recomputed_moment(est_lines, inp, shape, inputs, fwd, recompute)
        moments.append(Moment(name=n, bytes=round(b), calculation=c))
        if eager := eager_recomputed(est_lines, inp, shape, inputs, recompute):
            moments.append(Moment(name=eager[0], bytes=round(eager[1]), calculation=eager[2]))
    loss_held = _loss_held(est_lines, loss)
    # an encoder-decoder's shared table feeds both stacks' embeddings (T5Stack's embed_tokens:
    # transformers models/t5/modeling_t5.py), so its two gradients meet in the input buffer too
    shared = shape.get("tied") or (d is not None and d.arch == "t5")
    tied = shared and inp.lora_rank is None and not inp.sharded
    if tied and shape.get("vocab") and shape.get("hidden"):
        # GPT-2's tied head: at the end of backward the embedding's dense V·h gradient is added.
        # autograd sums the head's and the embedding's gradients out of place (torch
        # csrc/autograd/input_buffer.cpp, InputBuffer::accumulate), then AccumulateGrad
        # (functions/accumulate_grad.h, accumulateGrad) steals the sum as .grad when there is
        # none, or, when the loop keeps .grad (zeroed in place: gradient accumulation), adds it
        # in place (``variable_grad += new_grad``): the sum is a third V·h beside the kept .grad.
        g = 2 if inp.precision in ("mixed", "bf16") else 4
        copies = 3 if inp.grads_kept else 2
        end_held = _end_held(d, inp, loss_held)
        extra = copies * shape["vocab"] * shape["hidden"] * g / inp.tp
        moments.append(
            Moment(
                name="end of backward",
                bytes=round(weights + grads + states + extra + inputs + end_held),
                calculation=f"weights {f(weights)} + gradients {f(grads)} + optimizer "
                f"{f(states)} + tied embedding's gradient added: {copies}·V·h·{g} B {f(extra)}"
                + (
                    " (the head's, the embedding's and their sum beside the kept .grad)"
                    if inp.grads_kept
                    else ""
                )
                + hold
                + (f" + what the loop holds of the loss {f(end_held)}" if end_held else ""),
            )
        )
    tied_head = bool(shape.get("tied"))  # the head's gradient waits for the embedding's
    held_all = weights + grads + states + inputs
    moments += [
        Moment(name=n, bytes=round(b), calculation=c)
        for n, b, c in llama_first_norm.moments(d, inp, held_all, tied_head, est_lines)
        + llama_first_gate.moments(d, inp, held_all, tied_head, est_lines, loss is not None)
        + encoder_embeddings.moments(d, inp, held_all)
        + neox_embedding.moments(d, inp, held_all, tied_head, loss_held)
        + neox_first_block.moments(d, inp, held_all, tied_head, est_lines)
    ]
    temps = total("temporaries")
    sharded = weights - sum(ln.bytes for ln in est_lines if ln.group == "overhead")  # ZeRO-3
    logp = d.s * d.b * d.V * 4 / inp.tp if d is not None and d.V else 0.0  # the loss's log-probs
    if loss is not None:
        logp = loss.released
    then = 0.0  # in backward: the activations still alive when the largest one is stepped
    if inp.optimizer_in_bwd:  # the largest gradient, stepped (its scratch) and freed
        grads, temps, then = in_backward_step(inp, shape, temps, act - logp)
    elif loss is not None:  # LitGPT's loop holds this micro-batch's logits (losses.held_over)
        then = sum(term.bytes for term in loss.held)
    moments.append(
        Moment(
            name="backward, the largest parameter stepped" if inp.optimizer_in_bwd
            else "optimizer step",
            bytes=round(sharded + grads + states + temps + then + inputs),
            calculation=f"weights {f(sharded)}" + (" (shards)" if sharded != weights else "")
            + f" + gradients {f(grads)} + optimizer {f(states)} + step temporaries {f(temps)}"
            + (f" + {'activations' if inp.optimizer_in_bwd else 'what the loop'} still "
               f"holds {f(then)}" if then else "") + hold,
        )
    )  # fmt: skip
    # the step's inputs and the loss's scalars, which the loop holds through backward
    scalars = sum(ln.bytes for ln in est_lines if ln.name == LOSS)
    if loss is not None and not scalars:  # LitGPT's loop holds its loss's scalars alike: the
        # tied FSDP2 end of backward traced s·b·V·4 B above PyTorch's loss, no less
        scalars = LOSS_SCALARS
    parts = fsdp_parts((sharded, grads, states, kept, act, logp, inputs + scalars), loss)
    added = fsdp_moments(inp, shape, parts, [(m.name, m.bytes, m.calculation) for m in moments])
    added += lora_acts.nf4_moments(inp, shape, parts, recompute, added)
    added += lora_forward(inp, shape, parts, est_lines)
    # DDP's buckets: made when DDP wraps the model, alive at every moment (estimate.ddp)
    buckets, said = ddp_held(est_lines)
    moments = [
        Moment(name=n, bytes=round(b + buckets - v), calculation=c + said + why)
        for n, b, c in added
        for v, why in [viewed(inp, est_lines, n)]  # gradient_as_bucket_view: .grad the buckets'
    ]
    order = ["forward start (the root gathered)", "end of forward", "loss forward", "loss backward"]
    return sorted(moments, key=lambda m: order.index(m.name) if m.name in order else len(order))


def _end_held(d: acts.Dims | None, inp: TrainingConfig, loss_held: float) -> float:
    """What the loop holds of the loss at backward's end (``_loss_held``); an encoder-decoder's
    loss, counted with its log-probabilities (``t5._logits``), holds its output and backward's
    seed gradient (ones) there: 2 scalars in the logits' dtype."""
    if d is None or d.arch != "t5" or loss_held:
        return loss_held
    e = acts.Bytes.of(inp.precision)
    return 2 * (4 if e.amp else e.c)


def _loss_held(est_lines: list[Line], loss: losses.LossPlan | None) -> float:
    """What the loop still holds of the loss at backward's end: its scalars (the trace: 8 B
    above the tied end of backward on Falcon and BLOOM) and LitGPT's its logits
    (``losses.held_over``: −32,776 B on a tied Falcon-7B, V 512, 16 tokens)."""
    held = sum(ln.bytes for ln in est_lines if ln.name == LOSS)
    if loss is not None:
        held = (held or LOSS_SCALARS) + sum(t.bytes for t in loss.held)
    return held


def _last_output_held(d: acts.Dims, inp: TrainingConfig) -> float:
    """Our own Llama blocks' reference loss holds the last block's output to its end
    (models.blocks.head_loss's ``last``); where the residual stream is 16-bit the final norm
    saved an fp32 copy of it on the CPU target (F.rms_norm's composite upcasts; a fused CUDA
    kernel saves the tensor itself), so the tensor is more: tiny-llama bf16 seq 64 read
    s·b·h·2 = 8,192 B below the trace's forward (llama-7b mixed --fsdp --zero 2, where the
    loss's forward leads: 16 MiB). transformers' models rebind it to the norm's output."""
    e = acts.Bytes.of(inp.precision)
    own = d.arch == "llama" and not d.extra.get("hf_module") and not d.extra.get("mla")
    if not own or e.r == 4 or getattr(inp, "target", "cuda") == "cuda":
        return 0.0
    return d.s * d.b * d.h * e.r / inp.tp


def _teacher_block(
    d: acts.Dims | None, inp: TrainingConfig, fwd: float, loss: losses.LossPlan | None
) -> list[Moment]:
    """--kd-teacher: the teacher's forward through a block (``estimate.distill``, a bound)."""
    if not inp.kd_teacher or d is None or loss is None:
        return []
    from profiling.estimate import block_terms, distill

    e = acts.Bytes.of(inp.precision)
    d_t = distill.teacher_dims(inp)
    layer = sum(t.bytes for t in block_terms.per_layer(d_t, e, distill.teacher_config(inp)))
    kept = sum(t.bytes for t in loss.kept)
    x = losses.context(d, e, inp)
    return [Moment(name=n, bytes=round(v), calculation=c)
            for n, v, c in distill.block_moment(x, d_t, layer, fwd, kept)]  # fmt: skip


__all__ = ["Moment", "step_moments"]
