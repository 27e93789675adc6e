"""QLoRA on Llama's kind of decoder (our blocks, transformers' Llama) with few tokens next to
its MLP (h 256, f 1024, 16 tokens): the last block's down dequantized in forward, not the loss,
is the step's peak. bitsandbytes' ``MatMul4Bit.forward`` dequantizes the 4-bit weight to the
compute dtype (after its fp32 absmax under double quantization) beside the layer's input, and
frees it once the output is made; the estimate had no such moment in forward (bf16 0.989,
autocast 0.848 of the trace there).

At that moment, counted from the end of forward as ``llama_end``'s down's forward is (its
``released`` and held tensors), beside what the blocks keep:
- the gated product, down's input, where nothing kept counts it (fp32 under autocast:
  bitsandbytes returns its input's dtype), and under autocast its 16-bit cast; an adapted
  down's adapter's tensors not made yet (under autocast its 16-bit input copy, mask, A output
  and A/B weight copies);
- autocast's cached copies of the first block's A weights, which nothing saves;
- down's weight dequantized, h·f in the compute dtype, and its absmax;
- not yet made: the base's output, the final norm's and the loss's tensors, and under
  autocast the head's 16-bit weight copy.

Equal to the trace but for its scalars on transformers' module; a bound on our blocks (their
attention's input norm output counted held, as ``llama_end`` counts it under a 4-bit base).
Without checkpointing (a recomputed block's bound: ``estimate.recomputed_eager``), under
transformers' loss, one GPU; not torchao's or Fabric's 4-bit bases. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.lora_bytes import own_copies
from profiling.estimate.selective import blocks_keep_saved
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "forward, the last block's down dequantized"


def applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.arch != "llama" or set(d.extra) - {"hf_module"}:
        return False
    if d.extra.get("hf_module") not in (None, "llama", "mistral") or cfg.loss != REFERENCE:
        return False
    if not cfg.qlora or cfg.torchao_nf4 or cfg.fabric_bnb or cfg.dora:
        return False
    if not blocks_keep_saved(cfg) or cfg.tp != 1 or cfg.sharded or cfg.compile:
        return False
    return not (cfg.activation_offload or cfg.optimizer_in_bwd)


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment (name, bytes, calculation), or none where it does not apply."""
    if not applies(d, cfg):
        return []
    assert d is not None
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import dequant_absmax_bytes
    from profiling.estimate.llama_end import _held, released
    from profiling.estimate.step_scalars import LOSS

    e = Bytes.of(cfg.precision)
    T, h, f, V, r = d.s * d.b, d.h, d.f, int(d.V or 0), int(cfg.lora_rank or 0)
    t = set(cfg.lora_targets)
    gone = released(d, e, cfg, lines)
    held, held_words = _held(d, e, cfg)
    c = 4 if e.amp else e.c  # bitsandbytes' output dtype: its input's
    product = T * f * c  # kept by bitsandbytes (its input needs a gradient), or counted as
    later = 0  # what down's adapter keeps, made after the base's forward
    if "down" in t:
        from profiling.estimate.lora_bytes import adapter_bytes, mask_bytes

        a = adapter_bytes(cfg)
        mask = mask_bytes(cfg) if cfg.lora_dropout else 0
        later = T * r * a
        if not own_copies(cfg, e):
            product = 0  # lora_A keeps that very tensor: counted
        elif not e.amp:  # its own dropped copy and mask counted instead, made later
            later += T * f * (a + mask)
        else:  # the fp32 product no one keeps stays; autocast's 16-bit cast of it for A's
            # matmul (saved), the mask, A's 16-bit output and the 16-bit A and B copies its
            # matmuls save come after the base's forward
            later = T * r * 2 + T * f * (2 + mask) + r * (f + h) * 2
    cast = T * f * 2 if e.amp else 0
    first = r * h * 2 * len({"q", "k", "v"} & t) if e.amp else 0
    later += V * h * 2 if e.amp else 0
    # in forward the loss has not run: its scalars (``step_scalars``) are not made yet
    later += sum(ln.bytes for ln in lines if ln.name == LOSS)
    # the absmax is freed before the output is made, the weight after: the larger beside it
    deq = h * f * e.c + max(dequant_absmax_bytes(h * f, double_quant(cfg)), T * h * e.c)
    value = fwd - gone - later + held + product + cast + first + deq
    calc = (
        f"end of forward − the loss's, the final norm's and the head's kept tensors "
        f"{fmt_bytes(gone)}"
        + (
            f" − what is made later (the loss's scalars, autocast's head copy, down's adapter's "
            f"tensors) "
            f"{fmt_bytes(later)}"
            if later
            else ""
        )
        + f" + {held_words} {fmt_bytes(held)}"
        + (f" + its input s·b·f·{c} {fmt_bytes(product)}" if product else "")
        + (f" + its 16-bit cast s·b·f·2 {fmt_bytes(cast)}" if cast else "")
        + (f" + autocast's copies of the first block's A {fmt_bytes(first)}" if first else "")
        + f" + its weight dequantized h·f·{e.c} and the larger of its absmax and its output "
        f"s·b·h·{e.c} {fmt_bytes(deq)} = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "applies", "moments"]
