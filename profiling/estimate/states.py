"""Model states in closed form: weights, gradients, optimizer state by precision and optimizer,
sharded by ZeRO stage and tensor parallelism, for full training or LoRA/QLoRA; the optimizer
step's temporaries. Each function appends components to a :class:`Ledger`.

Bytes per trainable parameter (Ψ), Adam-family optimizer:

    precision   weights  gradients  master  two moments   total
    fp32           4         4         —        8          16
    amp-*          4         4         —        8          16   (autocast: 16-bit copies are
                                                                  activations, not states)
    mixed          2         2         4        8          16   (+4 with --fp32-grads: 20)
    bf16           2         2         —        4           8

No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling._config_lora import trains_16bit
from profiling.config import OPTIMIZERS, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.adafactor_step import tensorwise_temporaries
from profiling.estimate.dora import with_magnitudes
from profiling.estimate.ledger import Ledger, Line, Sharding
from profiling.estimate.optim_states import (
    largest_adapter,
    lora_blocks,
    lora_layers,
    tensorwise_states,
    with_decoder,
)
from profiling.estimate.step_order import loop_elements
from profiling.records import Step
from profiling.units import fmt_count

QLORA_BITS = 4 + 0.127  # NF4 + double-quantized block constants (QLoRA paper, §3)

# Optimizer-step temporaries of PyTorch's implementations, measured by the trace: how many
# parameter-sized fp32 (master-dtype) lists a foreach step allocates at once, and how many
# tensor-sized temporaries the for-loop step makes for its largest tensor.
_TEMP_LISTS = {
    "adamw": (1, 2),
    "adam": (1, 2),
    "sgd": (0, 0),
    "sgd-nomomentum": (0, 0),
    "adagrad": (2, 1),
    "rmsprop": (1, 1),
    # bitsandbytes: one fused kernel per parameter, updating in place (profiling.estimate.bnb)
    "adam8bit": (0, 0),
}


def _state(
    ledger: Ledger,
    sharding: Sharding,
    stage: int,
    name: str,
    count: int,
    per: float,
    label: str,
    category: str,
    symbol: str = "Ψ",
) -> None:
    div, sym, num = sharding.of(stage)
    ledger.add(
        Line(
            name=name,
            bytes=count * per / div,
            unsharded=count * per / sharding.t,
            formula=f"{symbol} · {label}{sym}",
            substituted=f"{fmt_count(count)} · {label}{num}",
            group="model states",
            category=category,
        )
    )


def state_bytes(precision: str) -> float:
    """Bytes of one optimizer-state element: 16-bit only in pure bf16 training."""
    return 2 if precision == "bf16" else 4


def optimizer_states(
    optimizer: str, precision: str, hidden: int | None, bnb: bool = False
) -> list[tuple[str, float, str]]:
    """(name, bytes per trainable parameter, label) for each optimizer state (``bnb``:
    bitsandbytes' 32-bit states, fp32 whatever the precision)."""
    e = 4 if bnb else state_bytes(precision)
    if optimizer == "adam8bit":  # bitsandbytes (tensor by tensor: optim_states.eight_bit_states)
        return [(name, 1 + 4 / 256, "(1 + 4/256) B") for name in OPTIMIZERS[optimizer].states]
    if optimizer == "adafactor":  # β1 = None: one row and one column vector per matrix
        if hidden is None:
            return [("factored variance", 0, "≈ 0 (needs --hidden)")]
        return [("factored variance", 2 / hidden * e, f"(2/h)·{e} B = 2/{hidden}·{e} B")]
    return [(name, e, f"{e} B") for name in OPTIMIZERS[optimizer].states]


def weight_bytes(precision: str) -> int:
    """Bytes per parameter of the weights (and gradients) the model holds."""
    return 2 if precision in ("mixed", "bf16") else 4


def full_training(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding) -> None:
    """Weights, gradients, master copy and optimizer state of all Ψ parameters."""
    psi = int(shape["params"])
    w = weight_bytes(cfg.precision)
    wname = {"mixed": "fp16/bf16", "bf16": "bf16"}.get(cfg.precision, "fp32")
    # FSDP2's MixedPrecisionPolicy: the fp32 shards are the master weights and the gradients
    # are reduced into fp32 shards; the 16-bit copies exist only gathered.
    fsdp_mixed = cfg.precision == "mixed" and cfg.fsdp and cfg.gpus > 1
    if fsdp_mixed:
        w, wname = 4, "fp32 shards: the master weights"
    _state(ledger, sh, 3, f"Weights ({wname})", psi, w, f"{w} B", "parameters")
    gname = "fp32, reduced by FSDP2" if fsdp_mixed else wname
    _state(ledger, sh, 2, f"Gradients ({gname})", psi, w, f"{w} B", "gradients")
    if cfg.fp32_grads and not fsdp_mixed:
        _state(ledger, sh, 2, "Gradients (fp32 copy)", psi, 4, "4 B", "gradients")
    if cfg.precision == "mixed" and not fsdp_mixed:
        _state(ledger, sh, 1, "Optimizer: fp32 master weights", psi, 4, "4 B", "optimizer")
    paged = cfg.paged_optimizer
    states = optimizer_states(cfg.optimizer, cfg.precision, shape.get("hidden"), paged)
    if not tensorwise_states(ledger, cfg, shape, sh, tuple(name for name, _, _ in states)):
        for name, per, label in states:
            _state(ledger, sh, 1, f"Optimizer: {name}", psi, per, label, "optimizer")
    _step_counters(ledger, cfg, shape)


def _step_counters(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    # torch's Adam, RMSprop and Adagrad keep one fp32 scalar `step` per parameter tensor
    # (torch/optim/adam.py, rmsprop.py _init_group, adagrad.py __init__ at torch 2.13).
    tensors = shape.get("param_tensors")
    if cfg.lora_rank is not None:  # LoRA: A and B of each adapted layer
        tensors = lora_tensors(cfg, shape)
    bnb = cfg.paged_optimizer  # bitsandbytes' step counter is a Python int
    if cfg.optimizer in ("adam", "adamw", "rmsprop", "adagrad") and tensors and not bnb:
        ledger.add(
            Line(
                name="Optimizer: step counters",
                bytes=4 * tensors,
                unsharded=4 * tensors,
                formula="parameter tensors · 4 B",
                substituted=f"{tensors} · 4",
                group="model states",
                category="optimizer",
            )
        )


def lora_adapters(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, str, str]:
    """The adapters' parameter count, its formula and its numbers: r·(in + out) for A (in×r) and
    B (r×out) of each adapted layer, in every block, and once for an adapted LM head."""
    L, r = int(shape["layers"]), int(cfg.lora_rank or 0)
    layers = lora_layers(cfg, shape)
    per_block = sum(i + o for _, i, o in layers)
    count, names = L * r * per_block, ", ".join(t for t, _, _ in layers)
    formula, numbers = f"L·r·Σ(in + out) over {names}", f"{L}·{r}·{per_block}"
    if "lm_head" in cfg.lora_targets and shape.get("vocab"):
        count += r * (int(shape["hidden"]) + int(shape["vocab"]))
        formula += " + r·(h + V) (LM head)"
        numbers += f" + {r}·({shape['hidden']} + {shape['vocab']})"
    count, formula, numbers = with_decoder(cfg, shape, (count, formula, numbers))  # T5's
    count, formula, numbers = with_magnitudes(cfg, layers, shape, (count, formula, numbers))
    saved, tensors = saved_classifier(shape)
    if tensors:  # an encoder's classifier trains in full: peft's modules_to_save copy
        count += saved
        formula += " + the classifier's trained copy (peft's modules_to_save)"
        numbers += f" + {saved}"
    return count, formula, numbers


def saved_classifier(shape: dict[str, Any]) -> tuple[int, int]:
    """The parameters and tensors of the copy peft's ``modules_to_save`` trains beside an
    encoder classifier's frozen ``classifier``: BERT's and ViT's Linear h×n, RoBERTa's whole
    classification head (its dense h×h and out_proj h×n); masked LM trains none."""
    enc = shape.get("encoder")
    if shape.get("arch") != "encoder" or not enc or enc.get("head") == "mlm":
        return 0, 0
    h, n = int(shape["hidden"]), int(enc["labels"])
    if enc.get("kind") == "roberta":
        return h * h + h + h * n + n, 4
    return h * n + n, 2


def lora_tensors(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """Parameter tensors: A and B (DoRA: a magnitude too) per adapted layer; a classifier's."""
    blocks, head = lora_blocks(cfg, shape), (2 + cfg.dora) * ("lm_head" in cfg.lora_targets)
    return (2 + cfg.dora) * blocks + head + saved_classifier(shape)[1]


def lora(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding) -> int:
    """A frozen base (16-bit, or NF4 with QLoRA) and trainable adapters on the layers
    ``lora_targets`` names."""
    h, L = shape.get("hidden"), shape.get("layers")
    if h is None or L is None:
        raise ProfilingError("LoRA needs the model's shape: give --model or --layers and --hidden")
    psi = int(shape["params"])
    adapters, formula, numbers = lora_adapters(cfg, shape)
    if cfg.qlora:
        _qlora_base(ledger, cfg, shape, sh)
    else:
        w = 2 if cfg.param_dtype == "bf16" else 4  # FSDP's mixed: fp32 shards (fsdp_lora)
        wname = "fp32" if w == 4 else "fp16/bf16"
        _state(ledger, sh, 3, f"Base weights ({wname}, frozen)", psi, w, f"{w} B", "parameters")
    ledger.steps.append(
        Step(
            name="LoRA adapter parameters",
            formula=formula,
            substituted=numbers,
            value=adapters,
            unit="",
        )
    )
    ab = 2 if trains_16bit(cfg) else 4  # fp32 but under pure bf16 (peft's fp32 cast: there too)
    _state(ledger, sh, 3, "LoRA adapter weights", adapters, ab, f"{ab} B", "parameters", "A")
    _state(ledger, sh, 2, "LoRA adapter gradients", adapters, ab, f"{ab} B", "gradients", "A")
    states = optimizer_states(cfg.optimizer, "bf16" if ab == 2 else "fp32", h, cfg.paged_optimizer)
    if not tensorwise_states(ledger, cfg, shape, sh, tuple(name for name, _, _ in states)):
        for name, per, label in states:
            _state(ledger, sh, 1, f"Optimizer: {name}", adapters, per, label, "optimizer", "A")
    _step_counters(ledger, cfg, shape)
    ledger.note(
        "LoRA: base weights frozen (no gradients, no optimizer state); adapters on "
        f"{', '.join(cfg.lora_targets)}; activations still flow through the whole model"
    )
    return adapters


def _qlora_base(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding) -> None:
    """bitsandbytes quantizes the blocks' Linear layers (FSDP2: its QuantStates whole); the rest
    stays in the model's dtype (16-bit; fp32 under autocast: prepare_model_for_kbit_training)."""
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import nf4_base_bytes, nf4_bytes, nf4_formula, shared_map_bytes
    from profiling.estimate.fsdp_lora_scope import nf4_whole  # FSDP2 shards packed bytes

    psi, h, L = int(shape["params"]), shape.get("hidden"), shape.get("layers")
    V = shape.get("vocab")
    linears = shape.get("block_linear_numels")
    dq = double_quant(cfg)
    if cfg.torchao_nf4:
        if not (linears and L):
            raise ProfilingError("--torchao-nf4 needs the model's Linear layers: give --model")
        _torchao_base(ledger, cfg, shape, sh, [int(n) for n in linears])
        return
    if linears and L:
        # A mixture of experts: every expert's gate, up and down is a 4-bit weight of its own.
        expert, experts = shape.get("expert_linear_numels") or (0, 0)
        quantized = int(L) * (sum(linears) + expert * experts)
        div, sym, num = sh.of(3)
        sizes = [nf4_bytes(n, dq) for n in linears] + [nf4_bytes(expert, dq)] * experts
        each = " + ".join(
            f"{sizes.count(b)}·{b}" if sizes.count(b) > 1 else str(b) for b in dict.fromkeys(sizes)
        )
        nf4 = nf4_base_bytes(every := [*linears, *[expert] * experts], int(L), dq)
        shared, stats = f" + {shared_map_bytes(dq)}" * dq, nf4_whole(cfg, nf4, every, int(L))
        ledger.add(
            Line(
                name="Base weights (NF4, frozen)" + (" (experts included)" if experts else ""),
                bytes=(nf4 - stats) / div + stats,
                unsharded=nf4 / sh.t,
                formula=f"L · Σ over a block's Linear weights of n values ({nf4_formula(dq)})"
                + (" + the shared map 1024" if dq else "") + f" B{sym}",
                substituted=f"{L} · ({each}){shared}{num}"
                + (" (double-quantized)" if dq else " (fp32 absmax: no double quantization)"),
                group="model states",
                category="parameters",
            )
        )  # fmt: skip
        head = _fabric_head(ledger, cfg, shape, sh)
        keep, kb = psi - quantized - head, 4 if cfg.autocast or cfg.param_dtype == "fp32" else 2
        rest = "Embeddings, norms" if head else "Embeddings, LM head, norms"
        _state(ledger, sh, 3, f"{rest} ({kb * 8}-bit, frozen)", keep, kb,
               f"{kb} B", "parameters", "the rest")  # fmt: skip
        return
    # A shape given by hand: the Linear layers are all but the embeddings.
    keep = int(shape.get("unquantized_params") or 0) or (2 * V * h if V and h else 0)
    bits, label = (QLORA_BITS, "(4 + 0.127)/8 B") if dq else (4.5, "(4 + 32/64)/8 B")
    _state(ledger, sh, 3, "Base weights (NF4, frozen)", psi - keep, bits / 8, label,
           "parameters", "(Ψ − embeddings)" if keep else "Ψ")  # fmt: skip
    if keep:
        _state(ledger, sh, 3, "Embeddings + LM head (16-bit, frozen)", keep, 2, "2 B",
               "parameters", "embeddings")  # fmt: skip


def _torchao_base(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding, linears: list[int]
) -> None:
    """torchao's NF4Tensor for every Linear of the blocks (torchtune's QLoRA builders); the
    embeddings, the LM head (or the tied embedding) and the norms stay in the model's dtype."""
    from profiling.estimate import nf4_torchao as ao

    problem = ao.problem(linears)
    if problem:
        raise ProfilingError(f"the estimate cannot model {problem}")
    L, w = int(shape["layers"]), weight_bytes(cfg.precision)
    sizes = [ao.nf4_bytes(n, w) for n in linears]
    each = " + ".join(
        f"{sizes.count(b)}·{b}" if sizes.count(b) > 1 else str(b) for b in dict.fromkeys(sizes)
    )
    div, sym, num = sh.of(3)
    ledger.add(
        Line(
            name="Base weights (torchao NF4, frozen)",
            bytes=L * sum(sizes) / div,
            unsharded=L * sum(sizes) / sh.t,
            formula=f"L · Σ over a block's Linear weights of n values ({ao.nf4_formula(w)}) B{sym}",
            substituted=f"{L} · ({each}){num}",
            group="model states",
            category="parameters",
        )
    )
    keep = int(shape["params"]) - L * sum(linears)
    _state(ledger, sh, 3, f"Embeddings, LM head, norms ({w * 8}-bit, frozen)", keep, w,
           f"{w} B", "parameters", "the rest")  # fmt: skip


def _fabric_head(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding) -> int:
    """Lightning Fabric's BitsandbytesPrecision (``--fabric-bnb``) replaces every ``nn.Linear``
    its ``init_module`` creates, so an LM head of its own is a 4-bit weight too; returns its
    values (0: none quantized)."""
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import nf4_bytes, nf4_formula

    head = int(shape.get("head_params") or 0)
    if not cfg.fabric_bnb or shape.get("tied") or not head:
        return 0
    dq = double_quant(cfg)
    div, sym, num = sh.of(3)
    ledger.add(
        Line(
            name="LM head (NF4, frozen: Lightning's BitsandbytesPrecision)",
            bytes=nf4_bytes(head, dq) / div,
            unsharded=nf4_bytes(head, dq) / sh.t,
            formula=f"n = V·h: {nf4_formula(dq)} B{sym}",
            substituted=f"n = {fmt_count(head)}{num}",
            group="model states",
            category="parameters",
        )
    )
    return head


def gathered_bytes(cfg: TrainingConfig) -> int:
    """Bytes per gathered parameter (and per unsharded gradient): 16-bit under mixed (FSDP2's
    bf16 gathers) and bf16, else fp32."""
    return 2 if cfg.precision in ("mixed", "bf16") else 4


def fsdp_root(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, int] | None:
    """ZeRO-3 over many GPUs with the model's shape known: (the root's parameters — embeddings,
    final norm, an untied LM head: the unit outside the blocks —, one block's); else None."""
    kept = cfg.zero == 2 and cfg.fsdp and not cfg.fsdp_flat  # FSDP2's reshard_after_forward off
    if not (cfg.zero == 3 or kept) or cfg.gpus == 1 or cfg.lora_rank is not None or cfg.deepspeed:
        return None
    root, block = shape.get("root_params"), shape.get("block_params")
    return (int(root), int(block)) if root and block else None


def zero3_gathered(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], t: int) -> None:
    """ZeRO-3 / FSDP gathers each block's full parameters while it runs. FSDP2 (which the trace
    runs) gathers the root — embeddings, final norm, LM head — around the loss as well: at the
    loss the root and one block are gathered (the other moments: ``fsdp_moments``)."""
    if cfg.zero != 3 or cfg.gpus == 1 or cfg.lora_rank is not None or cfg.deepspeed:
        return  # DeepSpeed's engine gathers a module and its prefetch bucket: deepspeed_engine
    wb = gathered_bytes(cfg)
    root = fsdp_root(cfg, shape)
    tp = " / t" if t > 1 else ""
    if root is not None:
        ledger.add(
            Line(
                name="ZeRO-3 gathered parameters (the root and one block, at the loss)",
                bytes=(root[0] + root[1]) * wb / t,
                unsharded=0,
                formula=f"(root + block) · {wb} B{tp}",
                substituted=f"({fmt_count(root[0])} + {fmt_count(root[1])}) · {wb}"
                + (f" / {t}" if t > 1 else ""),
                group="overhead",
                category="parameters",
            )
        )
        return
    big = shape.get("largest_layer_params")
    if not big:
        ledger.note("ZeRO-3 gathered parameters not counted: give the model's shape")
        return
    ledger.add(
        Line(
            name="ZeRO-3 gathered parameters",
            bytes=2 * big * wb / t,
            unsharded=0,
            formula=f"2 · largest block · {wb} B (current + prefetched){tp}",
            substituted=f"2 · {fmt_count(big)} · {wb}" + (f" / {t}" if t > 1 else ""),
            group="overhead",
            category="parameters",
        )
    )


def in_backward(ledger: Ledger, cfg: TrainingConfig) -> None:
    """Optimizer in backward: each gradient is stepped and freed as soon as it is ready, so
    none is left after backward (the step's moment holds the largest one: ``memory``)."""
    if not cfg.optimizer_in_bwd:
        return
    for ln in ledger.lines:
        if ln.category == "gradients":
            ln.name += " (each stepped and freed in backward)"
            ln.bytes = ln.unsharded = 0
            ln.substituted += " → freed"
    ledger.note(
        "optimizer in backward: each parameter is stepped by a hook as its gradient is ready "
        "and the gradient freed (torchtune's optimizer_in_bwd): no full set of gradients"
    )


def in_backward_step(
    cfg: TrainingConfig, shape: dict[str, Any], temps: float, act: float
) -> tuple[float, float, float]:
    """The moment a parameter is stepped in backward: (its gradient, the step's scratch, the
    activations still alive). An untied LM head is stepped first, beside nearly every
    activation; a tied one last, when they are gone, and a block's widest matrix mid-way."""
    g = weight_bytes(cfg.precision) / cfg.tp
    largest = int(shape.get("largest_tensor") or 0)
    if not shape.get("tied"):  # autocast's 16-bit copy of the head's weight is gone by then
        copy = 2 * int(shape.get("head_params") or 0) / cfg.tp if cfg.autocast else 0
        return largest * g, temps, act - copy
    block = int(shape.get("hidden") or 0) * int(shape.get("ffn") or 0)
    scale = block / largest if largest else 0.0
    end, mid = largest * g + temps, (block * g + temps * scale) + act
    return (largest * g, temps, 0.0) if end >= mid else (block * g, temps * scale, act)


def step_temporaries(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding, trainable: int
) -> None:
    """What the optimizer step allocates and frees: foreach lists, per-tensor scratch."""
    if cfg.offload_optimizer or tensorwise_temporaries(ledger, cfg, shape):
        return
    lists = (0, 0) if cfg.paged_optimizer else _TEMP_LISTS.get(cfg.optimizer)
    if lists is None:
        ledger.note(f"optimizer step temporaries of {cfg.optimizer} not modelled (0 counted)")
        return
    foreach = cfg.foreach if cfg.foreach is not None else not (cfg.fsdp or cfg.sharded)
    foreach = foreach and not cfg.optimizer_in_bwd  # one parameter at a time
    m = 2 if trains_16bit(cfg) else 4  # the dtype the optimizer steps in
    largest = int(shape.get("largest_tensor") or 0)
    div, sym, num = sh.of(1)
    if cfg.lora_rank is not None:
        largest = largest_adapter(cfg, shape)
    per_tensor = cfg.precision == "mixed" and not (cfg.fp32_grads or cfg.fsdp or cfg.sharded)
    if per_tensor and cfg.lora_rank is None:  # LoRA's fp32 adapters: the plain optimizer's
        # MasterWeightOptimizer: one tensor at a time, its gradient converted to fp32.
        k = 1 + (lists[0] if foreach else lists[1])
        name, formula = (
            "Optimizer step temporaries (largest tensor)",
            f"largest tensor · (4 B fp32 gradient + {k - 1} · 4 B scratch)",
        )
        value, numbers = largest * 4 * k, f"{fmt_count(largest)} · 4 · {k}"
    elif foreach:
        k = lists[0]
        name, formula = "Optimizer step temporaries (foreach)", f"{k} · Ψ_trained · {m} B{sym}"
        value, numbers = k * trainable * m / div, f"{k} · {fmt_count(trainable)} · {m}{num}"
    else:
        k = lists[1]
        elements, held = loop_elements(cfg, shape, k, largest)
        name, formula = "Optimizer step temporaries (for-loop)", f"{held} · {m} B{sym}"
        value, numbers = elements * m / div, f"{fmt_count(elements)} · {m}{num}"
    if not value:
        if k:
            ledger.note("optimizer step temporaries need the model's shape (none counted)")
        return
    ledger.add(
        Line(
            name=name,
            bytes=value,
            unsharded=value,
            formula=formula,
            substituted=numbers,
            group="temporaries",
            category="temporaries",
        )
    )


__all__ = [
    "QLORA_BITS",
    "fsdp_root",
    "full_training",
    "gathered_bytes",
    "in_backward",
    "in_backward_step",
    "lora",
    "lora_adapters",
    "lora_tensors",
    "optimizer_states",
    "saved_classifier",
    "step_temporaries",
    "weight_bytes",
    "zero3_gathered",
]
