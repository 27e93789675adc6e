"""The last block's 4-bit MLP under autocast (``amp-*``) on GPT-NeoX's kind of decoder, QLoRA
with bitsandbytes: what ``neox_amp_moments`` counts at the MLP going forward and going back.

bitsandbytes' ``Linear4bit.forward`` casts its input to the compute dtype and hands the product
back in the input's dtype (``out.to(inp_dtype)``: bitsandbytes/nn/modules.py @ 005a63c), and
``MatMul4Bit`` dequantizes the weight for the matmul and again for the input's gradient, saving
no input (bitsandbytes/autograd/_functions.py, ``MatMul4Bit.forward``/``backward``; the trace's
``trace.nf4.NF4Linear``). Under autocast the MLP's input is the LayerNorm's fp32 output, so up
hands back fp32, GELU runs in fp32 and down's input is that fp32 tensor. Read off the trace's
live storages (h 128, f 512, V 128, seq 256 × 2 and 128 × 3):

- **Going forward**, down frozen: GELU's fp32 output, its 16-bit cast, down's weight
  dequantized and its output. Down adapted (peft's ``lora.Linear.forward``: the base first,
  then ``lora_B(lora_A(dropout(x))) * scaling`` added), the highest of: the base's matmul (its
  input's 16-bit cast stands where A's own 16-bit copy will, which the end of forward counts:
  the dequantized weight and the output, less A's output and both weight copies not made yet),
  A's matmul under lora_dropout (the fp32 dropped copy beside the base's fp32 output, B's copy
  not made) and the sum (the base's fp32 output, B's scaled 16-bit output and the fp32 sum:
  s·b·h·(4 + 2 + 4)) — each beside GELU's fp32 output, which the adapter reads.
- **Going back**, down frozen: GELU's two fp32 f-wide gradients, or down's backward itself (its
  weight dequantized, its input's 16-bit gradient and fp32 cast), beside the gradient reaching
  the block and its 16-bit cast. Down adapted: its adapter goes back first and frees its
  tensors (A's 16-bit input, lora_dropout's mask, A's output, A's and B's 16-bit copies), then
  the base's input gradient is cast to fp32 and summed with the adapter's: three fp32 f-wide
  gradients at once (s·b·3f·4); or, few tokens beside h, the base's backward with the adapter's
  fp32 gradient alive (the dequantized weight and the 16-bit gradient). In a sequential block
  the gradient reaching it has no 16-bit cast waiting beside it (down's was its only reader).

Phi's ``gelu_new`` holds three fp32 f-wide gradients going back (``phi_amp``: its last mul's),
and its fp32 output costs nothing more going forward (fc1 already hands back fp32); BLOOM's
``bloom_gelu_back`` six, and ``bloom_gelu_forward`` four temporaries going forward
(``_gelu_grads``, ``at_down``). Equal to the trace but for its scalars (8 B) on GPT-NeoX (parallel
and sequential), Falcon-7B/40B, Phi and BLOOM, q,v to all six with lora_dropout, 256 × 2, 128 × 3
and the wide toy's 16 tokens (tests/profiling/trace/test_neox_qlora_amp.py).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import dora_neox_amp
from profiling.estimate.lora_bytes import mask_bytes
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims


def _absmax(d: Dims, cfg: TrainingConfig) -> int:
    """The fp32 absmax ``dequantize_4bit`` writes before down's weight (double quantization)."""
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import dequant_absmax_bytes

    return dequant_absmax_bytes(d.h * d.f, double_quant(cfg))


def _adapter_kept(d: Dims, cfg: TrainingConfig) -> int:
    """Down's adapter's kept tensors: A's 16-bit input copy (s·b·f·2), lora_dropout's mask, A's
    output (s·b·r·2), A's and B's 16-bit weight copies (r·(f + h)·2)."""
    T, h, f, r = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0)
    mask = T * f * mask_bytes(cfg) if cfg.lora_dropout else 0
    return T * f * 2 + mask + T * r * 2 + r * (f + h) * 2


def _gelu_grads(d: Dims) -> int:
    """GELU's fp32 f-wide gradients at once going back: GPT-NeoX's and Falcon's two (the
    gradient of its output and of its input), Phi's ``gelu_new`` three (its last mul's: both
    factors'), BLOOM's ``bloom_gelu_back`` six (transformers 5.24.0 ``modeling_bloom.py``)."""
    return {"phi": 3, "bloom": 6}.get(str(d.extra.get("hf_module")), 2)


def at_down(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """The MLP's transients at down going forward (bytes, calculation); BLOOM's
    ``bloom_gelu_forward`` before it if higher: four fp32 f-wide temporaries at once (``x * 0.5``,
    ``0.79788456 * x``, ``0.044715 * x`` and its product with x), down's adapter's tensors not
    made yet."""
    T, f = d.s * d.b, d.f
    gelu = 0
    if d.extra.get("hf_module") == "bloom":
        gelu = 4 * T * f * 4 - (_adapter_kept(d, cfg) if "down" in cfg.lora_targets else 0)
    value, words = _at_down(d, cfg)
    dora = dora_neox_amp.at_mlp(d, cfg) if dora_neox_amp.applies(d, cfg) else None
    if dora is not None and dora[0] > value:  # DoRA's full-size products (dora_neox_amp)
        value, words = dora
    if gelu > value:
        return gelu, "bloom_gelu_forward's four fp32 temporaries s·b·4f·4 "
    return value, words


def _at_down(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    T, h, f, r = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0)
    matmul = h * f * 2 + max(T * h * 2, _absmax(d, cfg))  # the weight, then its output
    if "down" not in cfg.lora_targets:
        value = T * f * (4 + 2) + matmul
        return value, "GELU's fp32 output and its cast s·b·f·(4 + 2), down's weight and output "
    base = matmul - (_adapter_kept(d, cfg) - T * f * 2)  # its input's cast stands for A's
    dropped = T * f * 4 + T * h * 4 - r * h * 2 if cfg.lora_dropout else 0
    total = T * h * (4 + 2 + 4)
    value = T * f * 4 + max(base, dropped, total)
    words = (
        "down's weight and output"
        if base >= max(dropped, total)
        else "the dropped fp32 copy and the base's fp32 output"
        if dropped >= total
        else "the base's fp32 output, B's scaled output and the sum s·b·h·(4 + 2 + 4)"
    )
    return value, f"GELU's fp32 output s·b·f·4 and, adapted down, {words} "


def backward(d: Dims, e: Bytes, cfg: TrainingConfig, after: float) -> tuple[float, str]:
    """The last block's 4-bit MLP going back; ``after``: the end of forward less the loss's
    tensors and the head's copies, plus the gradients made by then. An adapted up's DoRA going
    back (``dora_neox_amp.backward``) if higher."""
    value, words = _backward(d, e, cfg, after)
    if dora_neox_amp.applies(d, cfg):
        cast = 2 if d.extra["neox"]["residual"] != "sequential" else 0
        dora = dora_neox_amp.backward(d, cfg, after, d.s * d.b * d.h * (e.r + cast))
        if dora is not None and dora[0] > value:
            return dora
    return value, words


def _backward(d: Dims, e: Bytes, cfg: TrainingConfig, after: float) -> tuple[float, str]:
    T, h, f = d.s * d.b, d.h, d.f
    # the gradient reaching the block; in a parallel block its 16-bit cast for the attention's
    # 16-bit output waits beside it (in a sequential one down's was its only reader, freed)
    cast = 2 if d.extra["neox"]["residual"] != "sequential" else 0
    reach = T * h * (e.r + cast)
    words = (
        f" − the head's 16-bit copies; 4-bit layers: the gradient reaching the block and its "
        f"16-bit cast s·b·h·({e.r} + {cast}) + "
    )
    if "down" in cfg.lora_targets:
        freed = _adapter_kept(d, cfg)
        # down's base going back: its 16-bit output gradient, the dequantized weight, its input's
        # 16-bit gradient (or the absmax before it), beside the adapter's fp32 input gradient
        weight = T * f * 4 + T * h * (2 - cast) + h * f * 2 + max(T * f * 2, _absmax(d, cfg))
        n = max(3, _gelu_grads(d))
        value = after + reach + max(n * T * f * 4, weight) - freed
        return value, words + (
            f"the base's and the adapter's fp32 input gradients and their sum, or GELU's, "
            f"s·b·{n}f·4 (or the adapter's beside down's dequantized weight) − the adapter's "
            f"tensors {fmt_bytes(freed)}"
        )
    deq = h * f * 2 + _absmax(d, cfg) + T * h * (2 - cast)  # with its output's 16-bit gradient
    n = _gelu_grads(d)
    value = after + reach + max(n * T * f * 4, deq + T * f * (2 + 4))
    return value, words + (
        f"the larger of GELU's {n} fp32 gradients s·b·{n}f·4 and down's dequantized weight "
        f"{fmt_bytes(deq)} with its input's gradients s·b·f·(2 + 4)"
    )


__all__ = ["at_down", "backward"]
