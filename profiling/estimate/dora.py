"""DoRA (peft's ``use_dora``) in closed form: what peft's ``DoraLinearLayer`` adds to LoRA, as
the trace of peft's own layers keeps it (``profiling.trace.dora``).

Read in peft/tuners/lora/dora.py (``DoraLinearLayer.forward``) and variants.py
(``DoraLinearVariant.forward``): with no lora_dropout the base layer's output is reused, and

    mns = (magnitude / ‖W + scale·B·A‖.detach()).view(1, -1)
    result += (mns − 1) · base_result + mns · lora_B(lora_A(x)) · scale

so each adapted layer with o output features keeps, beyond LoRA's A output and input:

- the base layer's output (s·b·o, its dtype: 16-bit under autocast, else the model's), saved by
  ``(mns − 1) ·`` for the magnitude's gradient;
- B's output (s·b·o in the adapters' compute dtype), saved by ``mns ·`` for the same;
- three o-wide vectors in the adapters' dtype: the detached norm (the division's divisor),
  ``mns`` (for B's output's gradient), ``mns − 1`` (for the base output's gradient: not kept
  where no gradient flows into the base output, the first block's q, k, v);

and trains one magnitude value per output feature (``lora_magnitude_vector``: o per layer, in
the adapters' dtype, with its gradient and optimizer state). The norm itself, ``B·A`` rebuilt
through the adapters from an in × in identity (used only detached) and the full-size
``W + scale·B·A`` are temporaries of the forward.

With lora_dropout peft reruns the base layer, ``F.linear(dropout(x), weight.to(x.dtype))``:
the base output kept is that rerun's (in the input's dtype) and the rerun keeps its weight for
the input's gradient, a copy wherever the weight is cast (``dropped_weight_bytes``).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate import dora_head, dora_neox, dora_torchtune
from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.lora_bytes import adapter_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_ATTENTION_INPUTS = ("q", "k", "v")


def check(d: Dims, cfg: TrainingConfig) -> str | None:
    """Why the estimate cannot model DoRA here (None: it can)."""
    if not cfg.dora:
        return None
    if why := dora_torchtune.problem(cfg, None if d.extra.get("mla") else d.arch):
        return why
    if d.arch not in ("llama", "neox") or d.extra.get("mla"):
        return (
            "DoRA outside the Llama family's blocks and GPT-NeoX's kind (peft's DoRA on "
            "encoders' or DeepSeek's layers is not modelled); trace it instead"
        )
    slices = {"q", "k", "v"} & set(cfg.lora_targets)
    if d.arch == "neox" and dora_neox.fused(d) and slices and slices != {"q", "k", "v"}:
        return (
            "--lora-targets with all of q, k, v for DoRA on a fused query_key_value (peft "
            "adapts it whole: its target_modules name no slice)"
        )
    if "lm_head" in cfg.lora_targets and (why := _head_problem(d, cfg)):
        return why
    if cfg.torchao_nf4:
        return "torchtune's DoRA on its NF4 base (DoRALinear on torchao's NF4 is not modelled)"
    if cfg.compile:
        return "DoRA under torch.compile; estimate it eager or trace it"
    return None


def _head_problem(d: Dims, cfg: TrainingConfig) -> str | None:
    """What of DoRA on the LM head is not modelled (``dora_head``: a Llama-family model's
    16-bit or fp32 head on one GPU's step without dropout or checkpointing, checked against
    the trace in four precisions)."""
    sharded = cfg.fsdp or cfg.zero == 3 or cfg.tp > 1
    rerun = cfg.qlora or cfg.lora_dropout or cfg.checkpointing != "none"
    if sharded or rerun or d.arch != "llama":
        return (
            "DoRA on the LM head with --lora-dropout (peft reruns the head on the dropped "
            "input), --qlora, --checkpointing, a sharded head (--fsdp, --zero 3, --tp) or "
            "outside the Llama family; adapt the blocks' layers or trace it"
        )
    return None


def roles(d: Dims, cfg: TrainingConfig) -> list[str]:
    """The adapted layers of a block by role (GPT-NeoX's fused q/k/v: one ``qkv``)."""
    if d.arch == "neox":
        return dora_neox.roles(d, cfg)
    return [t for t in cfg.lora_targets if t in out_widths(d)]


def out_widths(d: Dims) -> dict[str, int]:
    """Each adaptable layer's output width: q's heads, k's and v's KV width, h, f."""
    if d.arch == "neox":
        return dora_neox.out_widths(d)
    return {"q": d.a * d.hd, "k": d.k, "v": d.k, "o": d.h, "gate": d.f, "up": d.f, "down": d.h}


def in_widths(d: Dims) -> dict[str, int]:
    """Each adaptable layer's input width."""
    if d.arch == "neox":
        return dora_neox.in_widths(d)
    return {"q": d.h, "k": d.h, "v": d.h, "o": d.a * d.hd, "gate": d.h, "up": d.h, "down": d.f}


def dropped_weight_bytes(e: Bytes, cfg: TrainingConfig) -> int:
    """With lora_dropout, peft reruns each base layer as ``F.linear(dropped x, weight.to(
    x.dtype))``, and the linear keeps that weight for x's gradient: a copy of its own where the
    weight is cast — to the fp32 adapters' input (``mixed``), from 4 bits (dequantized), or by
    autocast to 16 bits (a frozen weight is not in autocast's cache) — else the parameter
    itself (0)."""
    if e.amp:
        return 2
    a = adapter_bytes(cfg)
    return a if cfg.qlora or a != e.c else 0


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What DoRA keeps per block beyond LoRA (the module doc); with lora_dropout the base
    output kept is the rerun's (in the input's dtype) and the rerun keeps its weight
    (``dropped_weight_bytes``)."""
    width = out_widths(d)
    targets = roles(d, cfg)  # no gate on GPT-NeoX's kind, its fused q/k/v one layer
    o = sum(width[t] for t in targets)
    sb, tok = d.s * d.b, f"{d.s}·{d.b}"
    lora = 2 if e.amp else adapter_bytes(cfg)  # B's output
    # the frozen layer's output (a 4-bit one's: cast back to x's), or with dropout the rerun's
    base = lora if cfg.lora_dropout else 2 if e.amp else e.c
    a = adapter_bytes(cfg)
    terms = [
        Term(f"DoRA: base and B outputs kept for the magnitude ({', '.join(targets)})",
             sb * o * (base + lora), f"s·b·Σ outputs·({base} + {lora}) B",
             f"{tok}·{o}·({base} + {lora})"),
        Term("DoRA: the norm, mns and mns − 1 per output feature", 3 * o * a,
             f"3·Σ outputs·{a} B", f"3·{o}·{a}"),
    ]  # fmt: skip
    # bitsandbytes' 4-bit layer returns its fp32 input's dtype under autocast; peft's
    # base_result − bias is fp32 where the bias is (autocast leaves the parameters fp32); o
    # reads the attention's 16-bit output, so its 4-bit base hands back 16 bits
    bnb = cfg.qlora and not cfg.torchao_nf4
    fp32 = [t for t in targets if (bnb and t != "o") or _biased(d, t)]
    if e.amp and fp32 and not cfg.lora_dropout:
        p = sum(width[t] for t in fp32)
        terms.append(Term(f"DoRA under autocast: {', '.join(fp32)} keep their base output in "
                          "fp32 (a 4-bit layer's, or less the fp32 bias: base_result − bias)",
                          sb * p * 2, "s·b·Σ those outputs·(4 − 2) B",
                          f"{tok}·{p}·2"))  # fmt: skip
    w = dropped_weight_bytes(e, cfg) if cfg.lora_dropout else 0
    if w:
        ins = in_widths(d)
        n = sum(ins[t] * width[t] for t in targets)
        terms.append(Term("DoRA with dropout: each base layer's weight as its rerun on the "
                          f"dropped input keeps it ({'16-bit' if w == 2 else 'fp32'} copy)",
                          n * w, f"Σ in·out·{w} B", f"{n}·{w}"))  # fmt: skip
    return terms


def _biased(d: Dims, role: str) -> bool:
    """Whether the layer a role names has a bias (all of GPT-NeoX's kind's where it has any;
    q, k, v on a Llama-family model with qkv_bias, Qwen2's)."""
    if d.arch == "neox":
        return bool(d.extra["neox"]["bias"])
    return bool(d.extra.get("qkv_bias")) and role in _ATTENTION_INPUTS


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The first block's q, k, v: no gradient reaches their base outputs, so ``mns − 1`` is not
    kept there. Under autocast no op casts a magnitude (division and products are not autocast
    ops), so it has no 16-bit copy among the adapters' (``lora.once_per_model`` counts one for
    every trainable value)."""
    if not cfg.dora:
        return []
    terms = dora_head.kept(d, e, cfg)
    if d.arch == "neox":  # Phi: up (and down) may read the frozen embedding's norm too
        first = dora_neox.first_block(d, cfg)
    else:
        first = [t for t in cfg.lora_targets if t in _ATTENTION_INPUTS]
    o, a = sum(out_widths(d)[t] for t in first), adapter_bytes(cfg)
    if first and cfg.checkpointing != "full":
        terms.append(Term(f"DoRA: first block's {', '.join(first)} keep no mns − 1", -o * a,
                          f"−Σ outputs·{a} B", f"−{o}·{a}"))  # fmt: skip
    w = dropped_weight_bytes(e, cfg) if cfg.lora_dropout else 0
    if first and w and cfg.checkpointing != "full":  # their input needs no gradient either
        n = sum(in_widths(d)[t] * out_widths(d)[t] for t in first)
        terms.append(Term(f"DoRA with dropout: first block's {', '.join(first)} keep no weight",
                          -n * w, f"−Σ in·out·{w} B", f"−{n}·{w}"))  # fmt: skip
    if e.amp and cfg.checkpointing != "full":
        width = out_widths(d)
        mags = d.L * sum(width[t] for t in roles(d, cfg))
        terms.append(Term("DoRA: magnitudes have no autocast copy", -mags * 2, "−L·Σ outputs·2 B",
                          f"−{mags}·2"))  # fmt: skip
    return terms


def weight_norm_peak(e: Bytes, cfg: TrainingConfig, i: int, o: int) -> int:
    """The bytes one adapted layer (in i, out o) holds at once while peft rebuilds its weight's
    norm, beyond the tensors the block holds anyway: at the sum ``W + scale·B·A``, the graph of
    ``lora_B(lora_A(eye))`` (alive until the forward returns: the identity, or under autocast
    its 16-bit cast, and A's output), B·A in the input's dtype, the base weight cast to it where
    its own dtype differs (dequantized, for a 4-bit base), ``scale·B·A`` and the sum; under
    autocast, if higher, the moment B runs on the identity (the fp32 identity, its 16-bit cast,
    A's output and B's)."""
    a, r = adapter_bytes(cfg), int(cfg.lora_rank or 0)
    base = 2 if cfg.qlora or cfg.precision in ("mixed", "bf16") else 4
    eye = i * i * (2 if e.amp else a) + i * r * (2 if e.amp else a)
    cast = o * i * a if cfg.qlora or base != a else 0
    at_sum = eye + i * o * a + cast + 2 * o * i * a
    if not e.amp:
        return at_sum
    return max(at_sum, i * i * (4 + 2) + i * r * 2 + i * o * 2)


def moments(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    earlier: list[tuple[str, float, str]],
) -> list[tuple[str, float, str]]:
    """The largest adapted layer's weight norm being rebuilt (``weight_norm_peak``) in the last
    block's forward, counted as ``nf4_torchao.moments`` counts its dequantization there (an
    upper bound, not op by op); an adapted LM head's own (``dora_head.moments``, after the
    step's ``earlier`` moments)."""
    from profiling.estimate.activations import dims_of

    d = dims_of(shape, cfg.seq_or_default(), cfg.batch)
    if not cfg.dora or d is None:
        return []
    head = dora_head.moments(cfg, shape, parts, earlier)
    e = Bytes.of(cfg.precision)
    outs = out_widths(d)
    ins = in_widths(d)
    layers = [(t, ins[t], outs[t]) for t in roles(d, cfg)]
    if not layers:
        return head
    role, i, o = max(layers, key=lambda t: weight_norm_peak(e, cfg, t[1], t[2]))
    peak = weight_norm_peak(e, cfg, i, o)
    tokens, c = d.s * d.b, e.c
    fwd = sum(parts[k] for k in ("sharded weights", "optimizer", "kept", "activations"))
    base = fwd - parts["log-probs"]
    name = "forward, the last block's largest DoRA weight norm"
    extra = tokens * (2 * d.f + d.h) * c
    words = f"the gate and up outputs and the residual s·b·(2f + h)·{c}"
    calc = (
        f"end of forward {fwd:,.0f} B − the loss's kept tensors {parts['log-probs']:,.0f} B + "
        f"{words} + {role}'s weight norm rebuilt (in {i}, out {o}) {peak:,} B"
    )
    return [(name, base + extra + peak, calc), *head]


def with_magnitudes(
    cfg: TrainingConfig,
    layers: list[tuple[str, int, int]],
    shape: dict[str, Any],
    counted: tuple[int, str, str],
) -> tuple[int, str, str]:
    """The adapters' count, formula and numbers with DoRA's magnitude vectors added: o values
    per adapted layer of every block, V for an adapted LM head (unchanged without DoRA)."""
    count, formula, numbers = counted
    if not cfg.dora:
        return counted
    mags = int(shape["layers"]) * sum(o for _, _, o in layers)
    said = " + L·Σ out (DoRA's magnitudes)"
    if "lm_head" in cfg.lora_targets and shape.get("vocab"):
        mags += int(shape["vocab"])
        said = " + L·Σ out + V (DoRA's magnitudes, the head's V)"
    return count + mags, formula + said, numbers + f" + {mags}"


__all__ = [
    "check",
    "dropped_weight_bytes",
    "in_widths",
    "moments",
    "once_per_model",
    "out_widths",
    "per_layer",
    "roles",
    "weight_norm_peak",
    "with_magnitudes",
]
