"""Estimated memory: closed-form bytes for a training step, every step of the sum shown.

Model states (Ψ = parameters) by precision and optimizer, sharded by ZeRO stage over N GPUs
(``_estimate_states``); activations op by op for GPT-2 and Llama blocks, derived from what the
trace shows each op saving (``_estimate_activations``); the loss's fp32 log-probabilities; LoRA
and QLoRA; the optimizer step's temporaries. The peak is the largest of the step's moments
(end of forward, the loss's backward, the end of backward, the optimizer step), each summed from
the components alive then. DeepSpeed's own model-state estimators are reproduced
(``deepspeed_zero2_gpu_bytes`` / ``deepspeed_zero3_gpu_bytes``) so the difference of convention
(18 B/param against 16) is shown, not hidden. FLOPs and time: ``profiling.estimate.time``.

No torch here: an estimate runs anywhere in milliseconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate import activations as acts
from profiling.estimate import (
    block_terms,
    compiled,
    cpu_sdpa,
    eager_mask,
    encoder,
    hf_ops,
    losses,
    mla,
    neox,
    t5,
    variants,
)
from profiling.estimate import lora as lora_acts
from profiling.estimate import step_inputs as step_in
from profiling.estimate.counters import Counters, closed_form, outside_loss, tensors_alive
from profiling.estimate.ddp import add_buckets
from profiling.estimate.ddp_unused import add_used_map
from profiling.estimate.deepspeed import (
    deepspeed_note,
    deepspeed_zero2_gpu_bytes,
    deepspeed_zero3_gpu_bytes,
    host_verdict,
)
from profiling.estimate.deepspeed_engine import engine
from profiling.estimate.distill_states import teacher_lines
from profiling.estimate.fsdp import fsdp_refusal, one_gpu, unsharded_grads
from profiling.estimate.fsdp_lora import lora_gathered, unchecked_note
from profiling.estimate.fsdp_no_reshard import no_reshard, weight_sharding
from profiling.estimate.fsdp_offload import fsdp_offload
from profiling.estimate.ledger import Group, Ledger, Line, Sharding
from profiling.estimate.optim_states import offload, paged_states
from profiling.estimate.preference import reference_weights
from profiling.estimate.render import (  # noqa: F401  (re-exported: callers import them here)
    HEADROOM,
    describe_setup,
    moment_lines,
    render_text,
    status_for,
    time_lines,
    verdict,
    verdict_text,
)
from profiling.estimate.shape import params_mismatch, shape_of
from profiling.estimate.states import (
    full_training,
    in_backward,
    lora,
    step_temporaries,
    zero3_gathered,
)
from profiling.estimate.step_moments import Moment, step_moments
from profiling.estimate.step_scalars import recomputed_scalars
from profiling.estimate.time import TimeEstimate, time_estimate
from profiling.models.shape_overrides import override_note
from profiling.records import Step
from profiling.units import GiB, fmt_bytes

EstimateInput = TrainingConfig  # the one configuration every tool shares (alias kept for callers)


class Component(BaseModel):
    name: str
    bytes: int  # per GPU
    calculation: str
    group: Group
    unsharded_bytes: int  # the same component on one GPU without ZeRO
    category: str = "other"  # the trace's category: parameters, gradients, optimizer, …


class Estimate(BaseModel):
    inputs: EstimateInput
    shape: dict[str, Any]
    params: int
    trainable_params: int
    components: list[Component]
    moments: list[Moment]
    peak_moment: str
    steps: list[Step]
    per_gpu_bytes: int  # the peak: the largest moment
    total_bytes: int  # summed over all N·t GPUs (data-parallel × tensor-parallel)
    unsharded_bytes: int  # one GPU, no ZeRO: what data parallelism alone would need
    gpu_mem_bytes: int | None
    fits: bool | None
    status: str | None  # ✅ / ⚠️ / ❌
    deepspeed: dict[str, Any] | None
    time: TimeEstimate | None
    notes: list[str]
    counters: Counters | None = None  # allocated / reserved / nvidia-smi, each with its source

    def category_bytes(self, category: str) -> int:
        return sum(c.bytes for c in self.components if c.category == category)


# --------------------------------------------------------------------- activations


def _tp_split(name: str, t: int, sp: bool) -> int:
    """Korthikanti's rule: tensor parallelism splits attention and MLP; norms, their outputs and
    dropout masks only with sequence parallelism; an eager causal mask (s²) never."""
    replicated = name.startswith(
        ("norms", "matmul inputs", "dropout masks", "block inputs", "final")
    )
    return 1 if name == acts.CAUSAL_MASK else (t if sp else 1) if replicated else t


def _bracketed(text: str) -> str:
    """``a + b B`` as ``(a + b) B`` when the sum is not bracketed already; the unit stays
    outside the brackets."""
    body, unit = (text[:-2], " B") if text.endswith(" B") else (text, "")
    depth, top_level_sum = 0, False
    for i, ch in enumerate(body):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        top_level_sum |= depth == 0 and body.startswith(" + ", i)
    return f"({body}){unit}" if top_level_sum else text


def _add_activation(ledger: Ledger, term: acts.Term, times: int, t: int, sp: bool) -> None:
    div = _tp_split(term.name, t, sp)
    value = term.bytes * times / div
    prefix_f = "L · " if times > 1 else ""
    prefix_s = f"{times} · " if times > 1 else ""
    suffix = f" / {div}" if div > 1 else ""
    formula, substituted = term.formula, term.substituted
    if prefix_f or suffix:  # a sum multiplied or divided needs its brackets: L · (a + b)
        formula, substituted = _bracketed(formula), _bracketed(substituted)
    ledger.add(
        Line(
            name=term.name if term.name[0].isupper() else f"Activations: {term.name}",
            bytes=value,
            unsharded=value,
            formula=prefix_f + formula + (" / t" if div > 1 else ""),
            substituted=prefix_s + substituted + suffix,
            group="activations",
            category="activations",
        )
    )


def _activations(
    ledger: Ledger, inp: EstimateInput, shape: dict[str, Any], loss: losses.LossPlan | None
) -> float:
    """Adds the activation components; returns what backward recomputes (full checkpointing)."""
    d = acts.dims_of(shape, inp.seq_or_default(), inp.batch)
    if d is None:
        ledger.note(
            "activations not counted: give --model, or --layers, --hidden and --heads "
            "(and --vocab for logits)"
        )
        return 0.0
    e = acts.Bytes.of(inp.precision)
    t, sp = inp.tp, inp.sequence_parallel
    if d.extra.get("hf_module"):
        cpu_sdpa.refuse_dropout(d, inp)
        ledger.note(hf_ops.assumption(d, inp))
    elif shape.get("hf_model_type"):
        ledger.note(
            "activations of the project's own blocks built from the config (what the trace builds"
            f" {acts.own_blocks_why(shape)})"
        )
    if shape.get("mla") and not acts._cuda(inp):
        ledger.note(
            "DeepSeek-V2's latent attention on the CPU target: SDPA with two head sizes falls "
            "back to its math path (s² probabilities kept), which the estimate does not model "
            "(it counts what CUDA's memory-efficient kernel keeps); trace it for the CPU's bytes"
        )
    layer = block_terms.per_layer(d, e, inp)
    lora = inp.lora_rank is not None and d.arch != "gpt2"
    problem = lora_acts.check_targets(d, inp) if lora else None
    if problem:
        raise ProfilingError(f"the estimate cannot model {problem}")
    if lora and not inp.compile:  # the compiled block's count holds its adapters
        layer += lora_acts.per_layer(d, e, inp)
    if inp.checkpointing == "full":
        _add_activation(ledger, acts.checkpointed_layer(d, e, inp.activation_offload), 1, t, sp)
        once = _once(d, e, shape, inp, loss)
        if e.amp:  # the blocks' weight copies die with the checkpointed region
            once = [acts.head_copy_only(term, shape) for term in once]
        if lora:
            once += lora_acts.once_per_model(d, e, inp, 0)
        for term in once:
            _add_activation(ledger, term, 1, t, sp)
        # the recomputed block's SDPA seed and offset (and Falcon's index tensors) beside its
        # tensors: every layer's are counted only where kept (estimate.step_scalars)
        seeds = recomputed_scalars(d, inp) if d.arch not in ("encoder", "t5") else 0
        return sum(term.bytes / _tp_split(term.name, t, sp) for term in layer) + seeds
    for term in layer:
        _add_activation(ledger, term, d.L, t, sp)
    for term in _once(d, e, shape, inp, loss):
        _add_activation(ledger, term, 1, t, sp)
    if lora:
        adapters = int(shape.get("lora_adapters") or 0)
        for term in lora_acts.once_per_model(d, e, inp, adapters):
            _add_activation(ledger, term, 1, t, sp)
    return 0.0


def _once(
    d: acts.Dims,
    e: acts.Bytes,
    shape: dict[str, Any],
    inp: EstimateInput,
    loss: losses.LossPlan | None = None,
) -> list[acts.Term]:
    """Once per model; with another stack's loss, the LM head's input and the logits' terms are
    that loss's (what it keeps), and a fused loss keeps no autocast copy of the head's weight."""
    head_input = loss is None
    if d.arch in ("encoder", "t5"):
        return (t5 if d.arch == "t5" else encoder).once_per_model(d, e, shape, inp)
    if d.extra.get("hf_module"):
        once = hf_ops.once_per_model(d, e, shape, inp, head_input) + neox.once_per_model(d, e, inp)
        once += eager_mask.once_per_model(d, e, inp)
    else:
        once = acts.once_per_model(d, e, shape, inp, head_input) + variants.once_per_model(
            d, e, inp
        )
        once += mla.once_per_model(d, e, inp) if d.extra.get("mla") else []
    once = compiled.once(once, d, e, shape, inp)
    if e.amp and inp.qlora:  # 4-bit blocks dequantize for each matmul: autocast copies none
        once = [acts.head_copy_only(term, shape, "4-bit") for term in once]
    if loss is None:
        return once
    once = [term for term in once if not term.name.startswith("Logits:")]
    if loss.drops_head_copy:
        once = [t for t in (losses.without_head_copy(x, shape) for x in once) if t is not None]
    return once + loss.kept


# --------------------------------------------------------------------- the estimate


def estimate(inp: EstimateInput) -> Estimate:
    """Closed-form memory of one training step, per GPU and in total, every step shown.

    Takes the validated configuration (a reference model or a parameter count, sequence and
    batch, precision, optimizer, GPUs, ZeRO stage, tensor parallelism, LoRA/QLoRA, activation
    checkpointing, GPU memory). Returns an :class:`Estimate`: the components (model states,
    activations, logits …) with the formula and substituted numbers of each step, and the
    per-GPU and total bytes. Needs no torch. Raises ``ProfilingError`` for a factory model.
    """
    if inp.is_factory:
        raise ProfilingError(  # --params beside the factory too: the factory's model is code
            f"the estimate cannot read the model the factory {inp.model!r} builds: give "
            "--model a reference name or hf:PATH, or --params N --layers L --hidden H --heads A "
            "--vocab V in place of the factory (trace and profile run the factory itself)"
        )
    if inp.is_plan:  # every rank of a plan: profiling.plans, never one averaged GPU
        raise ProfilingError(
            "a parallel plan (--pp, --cp, --dp-shard, --dp-replicate) is estimated per rank by "
            "profiling.plans.closed_form.estimate_plan ('journal-agent estimate' runs it)"
        )
    shape = shape_of(inp)
    if refusal := fsdp_refusal(inp, shape):
        raise ProfilingError(refusal)
    psi = int(shape["params"])
    sh = Sharding(n=inp.gpus, t=inp.tp, z=inp.zero)
    ledger = Ledger()
    if mismatch := params_mismatch(inp, shape):
        ledger.note(mismatch)
    if hand := override_note(inp):  # --layers … beside --model: the model's own fields replaced
        ledger.note(hand)
    if inp.lora_rank is not None:
        if unchecked := unchecked_note(inp):
            ledger.note(unchecked)
        trainable = lora(ledger, inp, shape, weight_sharding(inp, sh))
        shape["lora_adapters"] = trainable
    else:
        trainable = psi
        full_training(ledger, inp, shape, weight_sharding(inp, sh))
    reference_weights(ledger, inp, shape)  # --dpo's frozen copy (full DPO)
    teacher_lines(ledger, inp)  # --kd-teacher's frozen teacher
    zero3_gathered(ledger, inp, shape, inp.tp)
    no_reshard(ledger, inp, shape, inp.tp)
    lora_gathered(ledger, inp, shape, inp.tp)
    if not fsdp_offload(ledger, inp, shape):  # FSDP2's CPU offload, else ZeRO-Offload's
        offload(ledger, inp)
    paged_states(ledger, inp, shape)
    in_backward(ledger, inp)
    loss = losses.loss_plan(inp, shape)
    recompute = _activations(ledger, inp, shape, loss)
    step_in.add_lines(ledger, acts.dims_of(shape, inp.seq_or_default(), inp.batch), inp)
    step_temporaries(ledger, inp, shape, sh, trainable)
    engine(ledger, inp, shape)  # DeepSpeed's buffers and offload (--deepspeed)
    add_buckets(ledger, inp, trainable)  # DDP's Reducer (--gpus N, nothing sharded)
    add_used_map(ledger, inp, shape)  # its map of the parameters used (--ddp-find-unused)
    moments = step_moments(ledger.lines, inp, shape, recompute, loss)
    unsharded_grads(ledger, inp, shape)  # FSDP's no-sync accumulation: beside the moments
    peak = max(moments, key=lambda m: m.bytes)
    ledger.steps += [
        Step(name=f"Moment: {m.name}", formula=m.calculation, substituted=fmt_bytes(m.bytes),
             value=m.bytes, unit="B")
        for m in moments
    ]  # fmt: skip
    ledger.steps.append(
        Step(
            name="Peak per GPU",
            formula="max over the moments",
            substituted=" , ".join(f"{m.name} {fmt_bytes(m.bytes)}" for m in moments),
            value=peak.bytes,
            unit="B",
        )
    )
    gpu_mem = inp.gpu_mem_bytes()
    fits = status = None
    if gpu_mem:
        fits, status = status_for(peak.bytes, gpu_mem)
    timing = time_estimate(inp, shape)
    if timing is not None:
        ledger.steps += timing.steps + (timing.time.steps if timing.time else [])
    ds = deepspeed_note(inp, shape, ledger)
    fits, status = host_verdict(fits, status, ds)  # and the host's memory (--cpu-mem)
    components = [
        Component(
            name=ln.name,
            bytes=round(ln.bytes),
            calculation=ln.substituted,
            group=ln.group,
            unsharded_bytes=round(ln.unsharded),
            category=ln.category,
        )
        for ln in ledger.lines
    ]
    unsharded = _unsharded_peak(inp, peak.bytes)
    paged = round(sum(ln.bytes for ln in ledger.lines if ln.category == "paged"))
    kept = round(sum(ln.bytes for ln in ledger.lines if ln.category == "activations"))
    counters = closed_form(inp, peak.bytes, tensors_alive(inp, shape), paged,
                           outside_loss(moments), activations=kept)  # fmt: skip
    return Estimate(
        inputs=inp,
        shape=shape,
        params=psi,
        trainable_params=trainable,
        components=components,
        moments=moments,
        peak_moment=peak.name,
        steps=ledger.steps,
        per_gpu_bytes=peak.bytes,
        total_bytes=peak.bytes * inp.gpus * inp.tp,  # every tensor-parallel rank holds its share
        unsharded_bytes=unsharded,
        gpu_mem_bytes=gpu_mem,
        fits=fits,
        status=status,
        deepspeed=ds,
        time=timing,
        notes=ledger.notes,
        counters=counters,
    )


def _unsharded_peak(inp: EstimateInput, peak: int) -> int:
    """The same step on one GPU with nothing sharded by data parallelism (tensor parallelism
    kept): the configuration estimated again with one GPU, so whatever the GPU count changes
    (the optimizer's kernels, its temporaries, gathered parameters) is that of one GPU."""
    if inp.gpus == 1 and inp.zero == 0:
        return peak
    alone = inp.model_copy(update=one_gpu(inp))
    return estimate(alone).per_gpu_bytes


__all__ = [
    "Component",
    "Estimate",
    "EstimateInput",
    "GiB",
    "deepspeed_zero2_gpu_bytes",
    "deepspeed_zero3_gpu_bytes",
    "estimate",
    "render_text",
]
