"""Estimated memory: closed-form bytes for a training step, every step of the sum shown.

Model states (Ψ = parameters) by precision and optimizer, sharded by ZeRO stage over N GPUs;
activations by Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models") with tensor/sequence parallelism, recomputation and flash attention;
logits with the fp32 upcast for the loss; LoRA and QLoRA. DeepSpeed's own model-state
estimators are reproduced (``deepspeed_zero2_gpu_bytes`` / ``deepspeed_zero3_gpu_bytes``) so
the difference of convention (18 B/param against 16) is shown, not hidden.

No torch here: an estimate runs anywhere in milliseconds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from profiling.config import OPTIMIZERS, Precision, TrainingConfig
from profiling.errors import ProfilingError
from profiling.records import Step
from profiling.units import GiB, fmt_bytes, fmt_count
from profiling.workloads import WORKLOADS

# Below this share of the GPU an estimate is ✅; up to 100 % it is ⚠️ (allocator fragmentation,
# the CUDA context and NCCL buffers take the rest); above, ❌.
HEADROOM = 0.90
QLORA_BITS = 4 + 0.127  # NF4 + double-quantized block constants (QLoRA paper, §3)

# The estimate reads the one configuration model every tool shares (an alias kept for callers).
EstimateInput = TrainingConfig


class Component(BaseModel):
    name: str
    bytes: int  # per GPU
    calculation: str
    group: Literal["model states", "activations", "overhead"]
    unsharded_bytes: int  # the same component on one GPU without ZeRO


class Estimate(BaseModel):
    inputs: EstimateInput
    shape: dict[str, Any]
    params: int
    trainable_params: int
    components: list[Component]
    steps: list[Step]
    per_gpu_bytes: int
    total_bytes: int  # summed over all N·t GPUs (data-parallel × tensor-parallel)
    unsharded_bytes: int  # one GPU, no ZeRO: what data parallelism alone would need
    gpu_mem_bytes: int | None
    fits: bool | None
    status: str | None  # ✅ / ⚠️ / ❌
    deepspeed: dict[str, Any] | None
    notes: list[str]


# --------------------------------------------------------------------- DeepSpeed's formulas


def deepspeed_zero2_gpu_bytes(total_params: int, gpus: int, cpu_offload: bool = False) -> int:
    """DeepSpeed 0.19.8 ``estimate_zero2_model_states_mem_needs`` GPU bytes.

    Its multipliers: 2 = fp16 params (replicated); 18 = 2 fp16 grads + 4 fp32 grads + 4 fp32
    params + 8 optimizer states, partitioned over all GPUs. With CPU offload only the fp16
    params stay on the GPU.
    """
    if cpu_offload:
        return 2 * total_params
    return 2 * total_params + int(18 * total_params / gpus)


def deepspeed_zero3_gpu_bytes(
    total_params: int,
    largest_layer_params: int,
    gpus: int,
    cpu_offload: bool = False,
    cpu_offload_params: bool = False,
) -> int:
    """DeepSpeed 0.19.8 ``estimate_zero3_model_states_mem_needs`` GPU bytes."""
    largest = 4 * largest_layer_params
    if cpu_offload:
        return largest if cpu_offload_params else largest + int(2 * total_params / gpus)
    return largest + int(18 * total_params / gpus)


# --------------------------------------------------------------------- the model's shape


def _shape(inp: EstimateInput) -> dict[str, Any]:
    if inp.model is not None:
        w = WORKLOADS[inp.model]
        shape = {
            "name": w.name,
            "params": w.param_count(),
            "layers": w.layers,
            "hidden": w.hidden,
            "heads": w.heads,
            "vocab": w.vocab,
            "largest_layer_params": w.largest_layer_params(),
            "largest_module_params": w.largest_module_params(),
            "max_seq": w.max_seq,
            "kv_dim": w.n_kv_heads * w.head_dim,
            # Embedding tables (and an untied LM head): QLoRA leaves them in 16 bits.
            "unquantized_params": w.embedding_params()
            + (0 if w.tied_embeddings else w.vocab * w.hidden),
        }
    else:
        shape = {"name": f"{fmt_count(inp.params or 0)} parameters", "params": inp.params}
    for key in ("layers", "hidden", "heads", "vocab"):
        value = getattr(inp, key)
        if value is not None:
            shape[key] = value
    if inp.params is not None:
        shape["params"] = inp.params
    if "largest_layer_params" not in shape and shape.get("hidden") and shape.get("vocab"):
        h = shape["hidden"]
        shape["largest_layer_params"] = max(shape["vocab"] * h, 12 * h * h)
        shape["largest_module_params"] = max(shape["vocab"] * h, 4 * h * h)  # GPT's FFN h×4h
    return shape


def _bytes_per_param(precision: Precision, optimizer: str, hidden: int | None) -> dict[str, Any]:
    """Weights, gradients, master copy and optimizer-state bytes per trainable parameter."""
    weight = 2 if precision in ("mixed", "bf16") else 4  # autocast keeps fp32 parameters
    grad = weight
    master = 4 if precision == "mixed" else 0
    state = 2 if precision == "bf16" else 4  # bytes of one optimizer-state element
    states: list[tuple[str, float, str]]
    if optimizer == "adam8bit":
        # bitsandbytes: both moments in 8 bits (block-wise constants are < 1 % more).
        states = [(name, 1, "1 B") for name in OPTIMIZERS[optimizer].states]
    elif optimizer == "adafactor":  # β1 = None: one row and one column vector per matrix
        if hidden is None:
            states = [("factored variance", 0, "≈ 0 (needs --hidden)")]
        else:
            per = 2 / hidden * state
            states = [("factored variance", per, f"(2/h)·{state} B = 2/{hidden}·{state} B")]
    else:
        states = [(name, state, f"{state} B") for name in OPTIMIZERS[optimizer].states]
    return {"weight": weight, "grad": grad, "master": master, "states": states}


# --------------------------------------------------------------------- activations


def _activation_per_layer(inp: EstimateInput, s: int, b: int, h: int, a: int) -> tuple[int, str]:
    """Korthikanti et al. per-layer bytes (16-bit activations) and the formula with numbers."""
    t = inp.tp
    sp = inp.sequence_parallel
    no_scores = inp.attention == "flash" or inp.checkpointing == "selective"
    if t == 1:
        if no_scores:
            return 34 * s * b * h, f"34·s·b·h = 34·{s}·{b}·{h}"
        val = s * b * h * 34 + 5 * a * s * s * b
        return val, f"s·b·h·(34 + 5·a·s/h) = {s}·{b}·{h}·(34 + 5·{a}·{s}/{h})"
    if sp:
        if no_scores:
            return 34 * s * b * h // t, f"s·b·h·34/t = {s}·{b}·{h}·34/{t}"
        val = (s * b * h * 34 + 5 * a * s * s * b) // t
        return val, f"(s·b·h/t)·(34 + 5·a·s/h) = ({s}·{b}·{h}/{t})·(34 + 5·{a}·{s}/{h})"
    if no_scores:
        val = s * b * h * 10 + 24 * s * b * h // t
        return val, f"s·b·h·(10 + 24/t) = {s}·{b}·{h}·(10 + 24/{t})"
    val = s * b * h * 10 + (24 * s * b * h + 5 * a * s * s * b) // t
    return val, (
        f"s·b·h·(10 + 24/t + 5·a·s/(h·t)) = {s}·{b}·{h}·(10 + 24/{t} + 5·{a}·{s}/({h}·{t}))"
    )


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
        raise ProfilingError(
            f"the estimate needs a reference model or --params, not the factory {inp.model!r}"
        )
    shape = _shape(inp)
    psi = int(shape["params"])
    n = inp.gpus
    t = inp.tp
    z = inp.zero
    h = shape.get("hidden")
    L = shape.get("layers")
    a = shape.get("heads")
    V = shape.get("vocab")
    s, b = inp.seq_or_default(), inp.batch
    notes: list[str] = []
    components: list[Component] = []
    steps: list[Step] = []

    def add(
        name: str,
        per_gpu: float,
        unsharded: float,
        formula: str,
        substituted: str,
        group: str = "model states",
    ) -> None:
        components.append(
            Component(
                name=name,
                bytes=round(per_gpu),
                calculation=substituted,
                group=group,  # type: ignore[arg-type]
                unsharded_bytes=round(unsharded),
            )
        )
        steps.append(
            Step(name=name, formula=formula, substituted=substituted, value=per_gpu, unit="B")
        )

    def sharded(stage: int) -> tuple[int, str, str]:
        """Divisor, symbol and numbers for a state ZeRO shards from ``stage`` on (TP always)."""
        by_n = z >= stage and n > 1
        sym_parts = (["N"] if by_n else []) + (["t"] if t > 1 else [])
        num_parts = ([str(n)] if by_n else []) + ([str(t)] if t > 1 else [])
        if not sym_parts:
            return 1, "", ""
        if len(sym_parts) == 1:
            return (n if by_n else 1) * t, f" / {sym_parts[0]}", f" / {num_parts[0]}"
        return n * t, " / (N·t)", f" / ({n}·{t})"

    bpp = _bytes_per_param(inp.precision, inp.optimizer, h)
    wname = {"mixed": "fp16/bf16", "bf16": "bf16"}.get(inp.precision, "fp32")

    # ---- LoRA / QLoRA: a frozen base and small trainable adapters
    if inp.lora_rank is not None:
        if h is None or L is None:
            raise ProfilingError(
                "LoRA needs the model's shape: give --model or --layers and --hidden"
            )
        r = inp.lora_rank
        kv = int(shape.get("kv_dim") or h)
        # q, o (h×h) and k, v (h×kv) each get A (in×r) and B (r×out): r·(in + out) apiece.
        adapters = L * r * (6 * h + 2 * kv)
        if kv == h:
            a_formula, a_numbers = "8·L·h·r (A and B on q, k, v, o)", f"8·{L}·{h}·{r}"
        else:
            a_formula = "L·r·(6h + 2·kv) (A and B on q, o: h×h and k, v: h×kv)"
            a_numbers = f"{L}·{r}·(6·{h} + 2·{kv})"
        trainable = adapters
        div, sym, num = sharded(3)
        if inp.qlora:
            # bitsandbytes quantizes the Linear layers; the embeddings and LM head stay 16-bit.
            keep = int(shape.get("unquantized_params") or 0)
            if not keep and V is not None:
                keep = 2 * V * h  # untied embedding + LM head (Llama-style) assumed
            base_b = QLORA_BITS / 8
            add(
                "Base weights (NF4, frozen)",
                (psi - keep) * base_b / div,
                (psi - keep) * base_b / t,
                ("(Ψ − embeddings)" if keep else "Ψ") + " · (4 + 0.127)/8 B" + sym,
                f"{fmt_count(psi - keep)} · 4.127/8 B" + num,
            )
            if keep:
                add(
                    "Embeddings + LM head (16-bit, frozen)",
                    keep * 2 / div,
                    keep * 2 / t,
                    "embeddings · 2 B" + sym,
                    f"{fmt_count(keep)} · 2 B" + num,
                )
        else:
            base_b = bpp["weight"]
            add(
                f"Base weights ({wname}, frozen)",
                psi * base_b / div,
                psi * base_b / t,
                f"Ψ · {base_b} B" + sym,
                f"{fmt_count(psi)} · {base_b} B" + num,
            )
        steps.append(
            Step(
                name="LoRA adapter parameters",
                formula=a_formula,
                substituted=a_numbers,
                value=adapters,
                unit="",
            )
        )
        # Adapters train in fp32 unless everything is bf16 (PEFT's default for mixed).
        ab = 2 if inp.precision == "bf16" else 4
        abpp = _bytes_per_param("bf16" if ab == 2 else "fp32", inp.optimizer, h)
        div, sym, num = sharded(3)
        add(
            "LoRA adapter weights",
            adapters * ab / div,
            adapters * ab / t,
            f"A · {ab} B" + sym,
            f"{fmt_count(adapters)} · {ab} B" + num,
        )
        div, sym, num = sharded(2)
        add(
            "LoRA adapter gradients",
            adapters * ab / div,
            adapters * ab / t,
            f"A · {ab} B" + sym,
            f"{fmt_count(adapters)} · {ab} B" + num,
        )
        div, sym, num = sharded(1)
        for state_name, nbytes, label in abpp["states"]:
            add(
                f"Optimizer: {state_name}",
                adapters * nbytes / div,
                adapters * nbytes / t,
                f"A · {label}" + sym,
                f"{fmt_count(adapters)} · {label}" + num,
            )
        notes.append(
            "LoRA: base weights frozen (no gradients, no optimizer state); adapters on the "
            "attention projections q, k, v, o; activations still flow through the whole model"
        )
    else:
        trainable = psi
        div, sym, num = sharded(3)
        add(
            f"Weights ({wname})",
            psi * bpp["weight"] / div,
            psi * bpp["weight"] / t,
            f"Ψ · {bpp['weight']} B" + sym,
            f"{fmt_count(psi)} · {bpp['weight']} B" + num,
        )
        div, sym, num = sharded(2)
        add(
            f"Gradients ({wname})",
            psi * bpp["grad"] / div,
            psi * bpp["grad"] / t,
            f"Ψ · {bpp['grad']} B" + sym,
            f"{fmt_count(psi)} · {bpp['grad']} B" + num,
        )
        if inp.fp32_grads and inp.precision != "fp32":
            add(
                "Gradients (fp32 copy)",
                psi * 4 / div,
                psi * 4 / t,
                "Ψ · 4 B" + sym,
                f"{fmt_count(psi)} · 4 B" + num,
            )
        div, sym, num = sharded(1)
        if bpp["master"]:
            add(
                "Optimizer: fp32 master weights",
                psi * 4 / div,
                psi * 4 / t,
                "Ψ · 4 B" + sym,
                f"{fmt_count(psi)} · 4 B" + num,
            )
        for state_name, nbytes, label in bpp["states"]:
            add(
                f"Optimizer: {state_name}",
                psi * nbytes / div,
                psi * nbytes / t,
                f"Ψ · {label}" + sym,
                f"{fmt_count(psi)} · {label}" + num,
            )

    # ---- ZeRO-3 gathers each layer's full parameters while it runs
    if z == 3 and inp.lora_rank is None:
        big = shape.get("largest_layer_params")
        if big:
            wb = bpp["weight"]
            add(
                "ZeRO-3 gathered parameters",
                2 * big * wb / t,
                0,
                f"2 · largest block · {wb} B (current + prefetched)" + (" / t" if t > 1 else ""),
                f"2 · {fmt_count(big)} · {wb} B" + (f" / {t}" if t > 1 else ""),
                group="overhead",
            )
        else:
            notes.append("ZeRO-3 gathered parameters not counted: give the model's shape")

    # ---- activations and logits
    act_scale = 2 if inp.precision == "fp32" else 1
    if None in (h, L, a):
        notes.append(
            "activations not counted: give --model, or --layers, --hidden and --heads "
            "(and --vocab for logits)"
        )
    else:
        per_layer, formula = _activation_per_layer(inp, s, b, h, a)
        if inp.checkpointing == "full":
            sp_div = t if inp.sequence_parallel else 1
            ckpt = 2 * s * b * h // sp_div
            add(
                "Activations: checkpoints (full recompute)",
                L * ckpt * act_scale,
                L * ckpt * act_scale,
                "L · 2·s·b·h" + (" / t" if sp_div > 1 else ""),
                f"{L} · 2·{s}·{b}·{h}"
                + (f" / {t}" if sp_div > 1 else "")
                + (" ·2 (fp32)" if act_scale == 2 else ""),
                group="activations",
            )
            add(
                "Activations: one layer recomputed",
                per_layer * act_scale,
                per_layer * act_scale,
                "one layer of Korthikanti's formula",
                formula + (" ·2 (fp32)" if act_scale == 2 else ""),
                group="activations",
            )
        else:
            label = "Activations"
            if inp.checkpointing == "selective":
                label += " (selective recompute)"
            elif inp.attention == "flash":
                label += " (flash attention)"
            add(
                label,
                L * per_layer * act_scale,
                L * per_layer * act_scale,
                "L · " + formula.split(" = ")[0],
                f"{L} · " + formula.split(" = ")[1] + (" ·2 (fp32)" if act_scale == 2 else ""),
                group="activations",
            )
        if act_scale == 2:
            notes.append("fp32 activations: Korthikanti's 16-bit formula doubled (approximate)")
        if V is not None:
            e = 4 if inp.precision == "fp32" else 2
            per = e + 4
            add(
                "Logits + fp32 log-probs",
                s * b * V * per / t,
                s * b * V * per / t,
                f"s·b·V · ({e} + 4) B" + (" / t" if t > 1 else ""),
                f"{s}·{b}·{V} · {per} B" + (f" / {t}" if t > 1 else ""),
                group="activations",
            )

    per_gpu = sum(c.bytes for c in components)
    unsharded = sum(c.unsharded_bytes for c in components)
    steps.append(
        Step(
            name="Total per GPU",
            formula="Σ components",
            substituted=" + ".join(fmt_bytes(c.bytes) for c in components),
            value=per_gpu,
            unit="B",
        )
    )
    gpu_mem = inp.gpu_mem_bytes()
    fits = status = None
    if gpu_mem:
        fits, status = status_for(per_gpu, gpu_mem)

    ds = None
    if inp.precision == "mixed" and inp.optimizer in ("adam", "adamw") and inp.lora_rank is None:
        big = int(shape.get("largest_module_params") or 0)
        ds = {
            "zero2_gpu_bytes": deepspeed_zero2_gpu_bytes(psi, n),
            "zero2_formula": f"2Ψ + 18Ψ/N = 2·{fmt_count(psi)} + 18·{fmt_count(psi)}/{n}",
        }
        if big:
            ds["zero3_gpu_bytes"] = deepspeed_zero3_gpu_bytes(psi, big, n)
            ds["zero3_formula"] = (
                f"4·largest module + 18Ψ/N = 4·{fmt_count(big)} + 18·{fmt_count(psi)}/{n}"
            )
        if z in (2, 3) and f"zero{z}_gpu_bytes" in ds and t == 1:
            ours = sum(c.bytes for c in components if c.group != "activations")
            why = (
                "DeepSpeed also keeps an fp32 gradient copy (18 B/param where the ZeRO paper "
                "counts 16); --fp32-grads reproduces its number"
                if z == 2
                else "DeepSpeed counts 18Ψ/N (fp16 and fp32 gradients, fp32 weights, two "
                "states) plus 4 B per parameter of the largest single module; we count "
                "16Ψ/N plus the largest block gathered twice (current + prefetch)"
            )
            notes.append(
                f"DeepSpeed's ZeRO-{z} estimator gives "
                f"{fmt_bytes(ds[f'zero{z}_gpu_bytes'], 'GiB')} per GPU for model states "
                f"({ds[f'zero{z}_formula']}); ours is {fmt_bytes(ours, 'GiB')}: {why}"
            )
    return Estimate(
        inputs=inp,
        shape=shape,
        params=psi,
        trainable_params=trainable,
        components=components,
        steps=steps,
        per_gpu_bytes=per_gpu,
        total_bytes=per_gpu * n * t,  # every tensor-parallel rank holds its own share
        unsharded_bytes=unsharded,
        gpu_mem_bytes=gpu_mem,
        fits=fits,
        status=status,
        deepspeed=ds,
        notes=notes,
    )


# --------------------------------------------------------------------- plain-text rendering


def describe_setup(inp: EstimateInput, shape: dict[str, Any]) -> str:
    parts = [shape["name"], f"{inp.precision} {inp.optimizer}"]
    if inp.lora_rank:
        parts.append(f"{'QLoRA' if inp.qlora else 'LoRA'} r={inp.lora_rank}")
    parts.append(f"{inp.gpus} GPU" + ("s" if inp.gpus > 1 else ""))
    if inp.zero:
        parts.append(f"ZeRO-{inp.zero}")
    if inp.tp > 1:
        parts.append(f"TP={inp.tp}" + (" + SP" if inp.sequence_parallel else ""))
    parts.append(f"seq {inp.seq_or_default()} × batch {inp.batch}")
    if inp.checkpointing != "none":
        parts.append(f"{inp.checkpointing} recompute")
    if inp.attention == "flash":
        parts.append("flash attention")
    return ", ".join(parts)


def status_for(need: int, available: int) -> tuple[bool, str]:
    """(fits, ✅ / ⚠️ / ❌): ✅ up to HEADROOM of the GPU, ⚠️ up to all of it, ❌ beyond."""
    fits = need <= available
    return fits, "✅" if need <= HEADROOM * available else ("⚠️" if fits else "❌")


def verdict_text(need: int, available: int, per: str = "per GPU") -> str:
    _, status = status_for(need, available)
    avail, needed = fmt_bytes(available, "GB"), fmt_bytes(need, "GB")
    if status == "✅":
        return f"✅ Fits: {needed} of {avail} {per}"
    if status == "⚠️":
        return f"⚠️ Tight: {needed} of {avail} {per} (over {HEADROOM:.0%}: little headroom)"
    return f"❌ Exceeds {avail}: {needed} needed {per}"


def verdict(est: Estimate) -> str:
    if est.gpu_mem_bytes is None:
        return ""
    return verdict_text(est.per_gpu_bytes, est.gpu_mem_bytes)


def render_text(est: Estimate) -> str:
    """The table in the user's journal format: component, memory per GPU, calculation."""
    rows = [(c.name, fmt_bytes(c.bytes, "GB"), c.calculation) for c in est.components]
    total = ("Total per GPU", fmt_bytes(est.per_gpu_bytes, "GB"), verdict(est) or "Σ above")
    w0 = max(len(r[0]) for r in [*rows, total]) + 2
    w1 = max(len(r[1]) for r in [*rows, total]) + 2
    width = w0 + w1 + max(len(r[2]) for r in [*rows, total])
    rule = "─" * width
    lines = [
        f"Memory for training {describe_setup(est.inputs, est.shape)}",
        "",
        f"{'Component':<{w0}}{'Per GPU':<{w1}}Calculation",
        rule,
    ]
    lines += [f"{a:<{w0}}{b_:<{w1}}{c}" for a, b_, c in rows]
    lines += [rule, f"{total[0]:<{w0}}{total[1]:<{w1}}{total[2]}"]
    if est.inputs.zero or est.inputs.gpus > 1:
        lines.append(
            f"{'Without ZeRO':<{w0}}{fmt_bytes(est.unsharded_bytes, 'GB'):<{w1}}"
            "the same step on one GPU, nothing sharded"
        )
    lines.append(f"({fmt_bytes(est.per_gpu_bytes, 'GiB')} per GPU; 1 GB = 10^9 B, 1 GiB = 2^30 B)")
    for note in est.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


__all__ = [
    "OPTIMIZERS",
    "Component",
    "Estimate",
    "EstimateInput",
    "GiB",
    "deepspeed_zero2_gpu_bytes",
    "deepspeed_zero3_gpu_bytes",
    "estimate",
    "render_text",
]
