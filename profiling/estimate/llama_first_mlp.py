"""QLoRA on Llama's kind of decoder with very few tokens (4 beside h 256, f 1024): the first
block's MLP going back, not the last's, holds the step's peak. By then every later block has
gone back — its activations freed, its adapters' gradients made — and bitsandbytes'
``MatMul4Bit.backward`` dequantizes each 4-bit MLP weight, h·f in the gradient's dtype, beside
its absmax and then its input's gradient (``grad_output @ dequantize_4bit(B, ctx.state)
.to(grad_output.dtype).t()``, bitsandbytes autograd/_functions.py). With the optimizer's state
of the last step alive, that is more than the optimizer step itself holds where its
temporaries are smaller than the dequantized weight: the trace read 0.95-0.99 of it before
(wide toy, seq 4: bf16 all-linear 0.974, mixed all-linear 0.950).

Counted as a bound at the first block's down's base and at its gate's, the last to go
back, whichever is higher: the weights, the optimizer's state, the step's inputs, scalars and
RoPE tables; every trained tensor's gradient but the first block's adapters' not made yet (at
the gate its attention's; at down also its gate's and up's); one block's saved activations as
``memory`` counts them (at the gate less its MLP's); the gradients in flight — the one reaching
the block (s·b·h in the residual's dtype), at down its adapter's input gradient and its base's
16-bit output gradient (autocast's cast, ``mixed``'s promoted sum), at the gate the MLP norm
output's summed gradient, the gate output's and its 16-bit copy; and the weight dequantized,
h·f·c, with the larger of its absmax and its input's gradient. Under autocast the first
block's adapters' 16-bit A and B copies, which ``once_per_model`` counts, stay until each goes
back. Read off the trace (wide toy, 4 tokens): 1.002-1.012 of it — the first block's saved
tensors freed as it goes back are counted whole. Same scope as ``llama_dequant``. No torch
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the first block's MLP dequantized"
_SCALARS = "Activations: the step's scalars"
# the MLP's saved tensors in one block's terms (``activations.per_layer``, ``lora.per_layer``)
_MLP = ("MLP", "QLoRA under autocast: gate, up and SiLU")


def _adapters(d: Dims, cfg: TrainingConfig, roles: set[str]) -> int:
    """The values of the first block's adapters on ``roles``: r·(in + out) each."""
    q = d.a * d.hd
    shapes = {"q": (d.h, q), "k": (d.h, d.k), "v": (d.h, d.k), "o": (q, d.h),
              "gate": (d.h, d.f), "up": (d.h, d.f), "down": (d.f, d.h)}  # fmt: skip
    r = int(cfg.lora_rank or 0)
    return sum(r * sum(shapes[t]) for t in roles & set(cfg.lora_targets) & set(shapes))


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment (name, bytes, calculation), or none where ``llama_dequant``'s does not
    apply: the larger of the first block's down and gate going back."""
    from profiling.estimate import llama_dequant

    if not llama_dequant.applies(d, cfg):
        return []
    assert d is not None
    from profiling._config_behaviours import double_quant
    from profiling.estimate import lora
    from profiling.estimate.block_terms import per_layer
    from profiling.estimate.bnb import dequant_absmax_bytes
    from profiling.estimate.llama_end import mlp_bytes
    from profiling.estimate.lora_bytes import adapter_bytes

    e = Bytes.of(cfg.precision)
    T, h, f = d.s * d.b, d.h, d.f
    m = mlp_bytes(e, cfg)
    acts = sum(ln.bytes for ln in lines if ln.category == "activations")
    scalars = sum(ln.bytes for ln in lines if ln.name.startswith(_SCALARS))
    grads = 0 if cfg.grads_kept else sum(ln.bytes for ln in lines if ln.category == "gradients")
    terms = per_layer(d, e, cfg) + lora.per_layer(d, e, cfg)  # as ``memory`` counts a block
    block = sum(t.bytes for t in terms)
    mlp = sum(t.bytes for t in terms if t.name.startswith(_MLP))
    rope = 2 * d.s * d.hd * e.rope  # the RoPE tables every block reads, held to the end
    base = fwd - acts + scalars + rope + grads + block
    absmax = dequant_absmax_bytes(h * f, double_quant(cfg))
    weight = h * f * e.c
    a = adapter_bytes(cfg)
    # 16-bit copies of a gradient: under autocast ``Linear4bit``'s ``.to(inp_dtype)`` going
    # back; under ``mixed`` peft's fp32 sum gives an adapted base's output a cast of its own
    casts = e.amp or a != e.c
    t = set(cfg.lora_targets)
    # the adapters' gradients not made yet, less (autocast) the 16-bit copies of A and B their
    # matmuls saved, which ``once_per_model`` counts, not one block's terms
    copies = 2 if e.amp else 0
    # down: its adapter went back first (its gradients made, its input's gradient waiting)
    later = _adapters(d, cfg, {"q", "k", "v", "o", "gate", "up"}) * (a - copies)
    adapted = "down" in t
    down_flight = T * h * e.r + T * h * 2 * (e.amp or (casts and adapted)) + T * f * m * adapted
    at_down = base - later + down_flight + weight + max(absmax, T * f * e.c)
    # gate, the last: its MLP's saved tensors freed, up's and its adapters' gradients made; the
    # norm output's gradient (summed), its output's gradient and that one's 16-bit copy
    later = _adapters(d, cfg, {"q", "k", "v", "o"}) * (a - copies)
    gate_flight = T * h * (e.r + m) + T * f * m + T * f * 2 * (e.amp or (casts and "gate" in t))
    at_gate = base - mlp - later + gate_flight + weight + max(absmax, T * h * e.c)
    value = max(at_down, at_gate)
    which = "down" if at_down >= at_gate else "gate"
    calc = (
        f"end of forward less its activations {fmt_bytes(acts - scalars)} (the step's scalars "
        f"kept) and the RoPE tables {fmt_bytes(rope)} + the gradients {fmt_bytes(grads)} + one "
        f"block's saved activations "
        f"{fmt_bytes(block)}, at the first block's {which}: "
        + (
            f"− the first block's other adapters' gradients not made yet + the gradient "
            f"reaching it (s·b·h·{e.r}) and its copies and its adapter's input gradient "
            f"{fmt_bytes(down_flight)}"
            if which == "down"
            else f"− its MLP's saved tensors {fmt_bytes(mlp)} − its attention adapters' "
            f"gradients not made yet + the gradients in flight {fmt_bytes(gate_flight)}"
        )
        + f" + its weight dequantized h·f·{e.c} and the larger of its absmax and its input's "
        f"gradient = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
