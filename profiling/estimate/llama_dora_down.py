"""peft's DoRA on a Llama's down projection: the last block's DoRA sum at down, in the forward,
holds the step's peak on a vocabulary small next to the blocks (V 128 beside h 128, f 512)
under autocast — above the largest weight norm's rebuild ``dora.moments`` counts, where down's
input (f wide) and its identity (f × f) outweigh every other layer's (T = s·b tokens).

Read in peft 0.21 tuners/lora/layer.py ``Linear.forward`` (``x = self._cast_input_dtype(x,
lora_A.weight.dtype)``: a copy in the adapters' dtype where the input's differs, a local until
the layer returns), variants.py ``DoraLinearVariant.forward`` (no lora_dropout: the base output
reused) and dora.py ``DoraLinearLayer.forward``:

    lora_weight = get_lora_weight(lora_A, lora_B)       # lora_B(lora_A(eye(f))).T
    lora_weight = lora_weight.to(x.dtype)              # h·f in the adapters' dtype
    weight = dequantize_module_weight(base_layer).to(x.dtype)
    weight_norm = get_weight_norm(weight, lora_weight.detach(), scaling).detach()
    mag_norm_scale = (magnitude / weight_norm).view(1, -1)
    lora_result = lora_B(lora_A(x))
    result_dora = (mns − 1) * base_result + mns * lora_result * scaling

Alive at the sum's allocation, beyond what the end of forward keeps (base: the end of forward
less the loss's, the final norm's and the head's kept tensors and the loss's scalars):

- what the block holds unsaved (``llama_end._held``; under autocast the first block's A copies
  autocast's cache keeps), less what comes later: under autocast the head's 16-bit weight
  copy V·h·2 (the block's residual sum is the final norm's input, taken off with its line);
- down's input (the gated product, s·b·f in the MLP's dtype) where lora_A keeps a copy of its
  own, not it (peft's cast, autocast's cast), and peft's cast copy s·b·f·a where autocast keeps
  a 16-bit copy of that for A (the cast itself a local);
- the norm rebuild's leftovers, locals of ``forward`` until it returns: the identity's graph
  (A keeps the f × f identity, under autocast its 16-bit cast, B keeps A's f × r output),
  ``lora_weight`` h·f·a and the base weight cast to the adapters' dtype where its own differs
  (dequantized on a 4-bit base, the bf16 base under ``mixed``);
- ``(mns − 1)·base_result``, the scaled ``mns·lora_result`` and their sum, s·b·h·g each, g the
  larger of the adapters' and the MLP's element sizes (``mns`` promotes a 16-bit output);
  ``mns·lora_result`` itself is freed as its scaled copy is made (a product by a Python
  scalar saves nothing).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.lora_bytes import KERNEL_LOSSES, adapter_bytes, own_copies
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

SUM = "forward, the last block's DoRA sum at down"


def applies(cfg: TrainingConfig) -> bool:
    """DoRA on down (the head not adapted: its DoRA layer is ``dora_head``'s)."""
    t = set(cfg.lora_targets)
    return bool(cfg.dora and "down" in t and "lm_head" not in t)


def leftovers(e: Bytes, cfg: TrainingConfig, i: int, o: int) -> int:
    """What one adapted layer (in i, out o) leaves of its weight norm's rebuild until its
    forward returns: A's input on the identity (the i × i identity, or autocast's 16-bit cast
    of it), A's i × r output B keeps, ``lora_weight`` in the adapters' dtype and the base weight
    cast to it where its own dtype differs."""
    a, r = adapter_bytes(cfg), int(cfg.lora_rank or 0)
    k = 2 if e.amp else a  # the identity as A sees it, and A's output
    base = 2 if cfg.qlora or cfg.precision in ("mixed", "bf16") else 4
    cast = o * i * a if cfg.qlora or base != a else 0
    if cfg.lora_dropout and not e.amp:
        cast = 0  # the base layer's rerun keeps that very copy (``dora.dropped_weight_bytes``)
    return i * i * k + i * r * k + o * i * a + cast


def at_sum(d: Dims, e: Bytes, cfg: TrainingConfig, m: int, bias: bool = False) -> tuple[int, str]:
    """What down's DoRA layer holds at its sum's allocation beyond the end of forward and the
    block's held tensors, with down's input and base output of m bytes per element: its input
    (where A keeps a copy of its own), peft's cast of it, lora_dropout's rerun (the first output
    unused, under autocast the dropped input), the norm rebuild's leftovers and the three
    products. Where the layer has a bias (GPT-NeoX's kind) the base output waits beside
    ``base_result − bias`` (kept for the magnitude) for ``result + …``."""
    T, h, f, a = d.s * d.b, d.h, d.f, adapter_bytes(cfg)
    g = max(a, m)
    product = T * f * m if own_copies(cfg, e) else 0
    drop = bool(cfg.lora_dropout)
    cast = T * f * a if (e.amp or drop) and a != m else 0
    # with lora_dropout peft reruns the base layer on the dropped input: the first output
    # lives on unused, and under autocast the dropped input too (A keeps its 16-bit cast)
    rerun = T * h * m + (T * f * a if e.amp else 0) if drop else T * h * m if bias else 0
    rebuilt = leftovers(e, cfg, f, h)
    sums = 3 * T * h * g
    words = (
        (f" + down's input s·b·f·{m}" if product else "")
        + (f" + peft's cast of it s·b·f·{a}" if cast else "")
        + (
            f" + the base layer's first output{' and the dropped input' if e.amp else ''} "
            f"{fmt_bytes(rerun)}"
            if drop
            else f" + the base output waiting beside base_result − bias s·b·h·{m}"
            if bias
            else ""
        )
        + f" + down's norm rebuild's leftovers {fmt_bytes(rebuilt)} + (mns − 1)·result, the "
        f"scaled mns·lora_result and their sum 3·s·b·h·{g} {fmt_bytes(sums)}"
    )
    return product + cast + rerun + rebuilt + sums, words


def forward(
    d: Dims, e: Bytes, cfg: TrainingConfig, base: float, held: tuple[int, str], m: int
) -> list[tuple[str, float, str]]:
    """The last block's DoRA sum at down (the module doc), from ``base`` and what the block
    ``held`` unsaved, with the MLP's f-wide tensors of m bytes each."""
    if not applies(cfg):
        return []
    T, h, V = d.s * d.b, d.h, int(d.V or 0)
    r = int(cfg.lora_rank or 0)
    held_bytes, held_words = held
    if cfg.qlora and not own_copies(cfg, e) and {"gate", "up"} & set(cfg.lora_targets):
        # ``_held`` counts the MLP norm's output held on a 4-bit base (a bound for LoRA's
        # moments); here gate's or up's lora_A keeps that very tensor (bf16: no cast, no dropout)
        held_bytes -= T * h * e.r
    later = 0  # the block's residual sum: the final norm's input, in its line (released)
    if e.amp:
        held_bytes += r * h * 2 * len({"q", "k", "v"} & set(cfg.lora_targets))
        later = 0 if cfg.loss in KERNEL_LOSSES else V * h * 2
    layer, words = at_sum(d, e, cfg, m)
    value = base - later + held_bytes + layer
    calc = (
        f"{held_words} {fmt_bytes(held_bytes)}"
        + (f" − the head's 16-bit weight copy made later V·h·2 {fmt_bytes(later)}" if later else "")
        + words
    )
    return [(SUM, value, calc)]


__all__ = ["SUM", "applies", "at_sum", "forward", "leftovers"]
