"""peft's DoRA on the Llama kind's gate or up projection: the last block's DoRA layer going
back holds the step's peak on a vocabulary small next to the blocks (V 128 beside h 128,
f 512), above the SwiGLU's three gradients ``llama_end`` counts (T = s·b tokens).

Read in peft 0.21 tuners/lora/dora.py ``DoraLinearLayer.forward`` and variants.py
``DoraLinearVariant.forward`` (no lora_dropout: the base output reused), and
tuners/lora/layer.py ``Linear.forward``:

    result = base_layer(x)                                   # s·b·f, the MLP's dtype m
    mns = magnitude / ‖W + scale·B·A‖.detach()               # fp32 beside fp32 adapters
    result = result + ((mns − 1)·result + mns·lora_B(lora_A(x))·scale)
    result = result.to(torch_result_dtype)                   # back to m

The DoRA sum is in g, the larger of the adapters' and the MLP's element sizes (fp32 where
the magnitude is fp32 and the base output 16-bit: ``mixed``, autocast on a 16-bit base).
Going back, after ``mul``'s backward (its saved gate-and-up outputs freed, down's input
gradient consumed): where g ≠ m, ``.to``'s backward makes the gradient in g (s·b·f·g) and the
sum's backward a copy in m for the base branch; then ``(mns · lora_result) · scale`` goes
back — autograd runs the later-made node first (torch/csrc/autograd/engine.cpp, by sequence
number): the scaled gradient s·b·f·g, then ``MulBackward0``'s two products s·b·f·g each
(torch's derivatives.yaml ``mul_tensor_backward``: the dtype cast and the reduction to mns's
(1, f) come after, in the engine's ``validate_outputs``), then the reduction f·g. That is
the peak: up's at once; gate's after SiLU's backward (gate's output it saved freed), with
up's frozen base's input gradient (s·b·h, the residual's dtype) waiting to be summed — and
where up is DoRA-adapted too, its adapters' (s·b·h in the adapters' dtype), a bound.

Applies where ``llama_end`` does with DoRA on gate or up (not down, not the head: their
moments are not read here). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.lora_bytes import adapter_bytes
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

UP = "backward, the last block's DoRA up"
GATE = "backward, the last block's DoRA gate"
SUM = "forward, the last block's DoRA sum in the MLP"
# DoRA on these is not read here: down's and the head's layers going back
NOT_READ = frozenset({"down", "lm_head"})


def applies(cfg: TrainingConfig) -> bool:
    """DoRA on the MLP's gate or up, none on down or the head."""
    t = set(cfg.lora_targets)
    return bool(cfg.dora and {"gate", "up"} & t and not NOT_READ & t)


def moments(
    d: Dims, e: Bytes, cfg: TrainingConfig, three: float, m: int
) -> list[tuple[str, float, str]]:
    """The last block's DoRA up and gate going back, from ``three`` (``llama_end``'s SwiGLU's
    three gradients moment: down's input gradient and ``mul``'s two, beside what the block
    saved) with the MLP's f-wide tensors of m bytes each."""
    if not applies(cfg):
        return []
    T, h, f, t = d.s * d.b, d.h, d.f, set(cfg.lora_targets)
    a = adapter_bytes(cfg)
    g = max(a, m)  # the DoRA sum's dtype: mns (the magnitude's) promotes the base output
    # .to's backward in g, the sum's copy for the base branch in m (the m gradient it came
    # from freed): where g = m the one gradient reaching the layer serves both
    reach = T * f * (g + m) if g != m else T * f * m
    dora = 3 * T * f * g + f * g  # the scaled gradient, mul's two products, mns's reduction
    tail = (
        f" + the gradient reaching it s·b·f·{g}"
        + (f" and the base branch's copy s·b·f·{m}" if g != m else "")
        + f" + the scaled gradient and mul's two products 3·s·b·f·{g} + mns's reduction f·{g}"
    )
    out: list[tuple[str, float, str]] = []
    if "up" in t:
        # down's input gradient, mul's gradient of up's output, and the gate-and-up outputs
        # mul saved: freed
        freed = 4 * T * f * m
        value = three - freed + reach + dora
        calc = (
            f"the SwiGLU's three gradients' moment {fmt_bytes(three)} − down's input gradient, "
            f"mul's gradient of up's output and its two saved inputs 4·s·b·f·{m}{tail}"
        )
        out.append((UP, value, calc))
    if "gate" in t:
        # also mul's other gradient and gate's output SiLU saved; up's input gradients wait
        freed = 6 * T * f * m
        ups = T * h * e.r + (T * h * a if "up" in t else 0)
        # under autocast a 16-bit up's linear kept its input's 16-bit cast: freed as it went
        # back (its 16-bit input gradient then cast to the residual's dtype, freed too)
        ups -= T * h * 2 if e.amp and not cfg.qlora else 0
        value = three - freed + ups + reach + dora
        calc = (
            f"the SwiGLU's three gradients moment {fmt_bytes(three)} − the three, mul's two "
            f"saved inputs and gate's output SiLU saved 6·s·b·f·{m} + up's input gradient "
            f"s·b·h·{e.r}"
            + (f" and its adapters' s·b·h·{a}" if "up" in t else "")
            + (" − its 16-bit input copy s·b·h·2" if e.amp and not cfg.qlora else "")
            + tail
        )
        out.append((GATE, value, calc))
    return out


def forward(
    d: Dims, e: Bytes, cfg: TrainingConfig, base: float, held: tuple[int, str]
) -> list[tuple[str, float, str]]:
    """The last block's DoRA up (or, up frozen, gate) at its sum, from ``base`` (the end of
    forward less the loss's, the final norm's and the head's kept tensors and the loss's
    scalars) and what the block ``held`` unsaved (``llama_end._held``): ``(mns − 1)·result``,
    ``mns·lora_result`` and its scaled copy (s·b·f·g each) beside what peft's norm rebuild
    leaves until the forward returns (the identity's graph and B·A, the base weight cast to
    the input's dtype: ``dora.weight_norm_peak`` less its two sum temporaries), before the
    layer's output (and gate's, SiLU's: kept for backward, made later) exists. Grows with the
    tokens where the norm rebuild (``dora.moments``) grows with the weight."""
    from profiling.estimate.dora import weight_norm_peak

    if not applies(cfg):
        return []
    T, h, f, t = d.s * d.b, d.h, d.f, set(cfg.lora_targets)
    m, a = _mlp_dtype(e, cfg), adapter_bytes(cfg)
    g = max(a, m)
    later = T * f * m * (1 if "up" in t else 3)  # up's output; gate's: and SiLU's and up's
    graph = weight_norm_peak(e, cfg, h, f) - 2 * h * f * a
    value = base - later + held[0] + graph + 3 * T * f * g
    rerun = 0
    if cfg.lora_dropout:
        # peft reruns the base layer on the dropped input (``DoraLinearVariant.forward``:
        # base_result None): the first output, unkept, lives until the sum; under autocast the
        # dropped input too (lora_A keeps its 16-bit cast) — a bound by the norm rebuild's
        # few leftovers (+28,672 B on the V 128 toy), under mixed by s·b·h·4 (wide: +524,288 B)
        rerun = T * f * m + (T * h * a if e.amp else 0)
        value += rerun
    layer = "up" if "up" in t else "gate"
    calc = (
        f"the loss's scalars not made yet − the outputs made later s·b·f·{m}"
        f"{'' if layer == 'up' else '·3'} + {held[1]} {fmt_bytes(held[0])} + what {layer}'s "
        f"norm rebuild left {fmt_bytes(graph)} + (mns − 1)·result, mns·lora_result and its "
        f"scaled copy 3·s·b·f·{g}"
        + (
            f" + the base layer's first output and the dropped input {fmt_bytes(rerun)}"
            if rerun
            else ""
        )
    )
    return [(SUM, value, calc)]


def _mlp_dtype(e: Bytes, cfg: TrainingConfig) -> int:
    """``llama_end.mlp_bytes`` (imported there: this module is llama_end's)."""
    return 4 if e.amp and cfg.qlora else e.c


__all__ = ["GATE", "NOT_READ", "SUM", "UP", "applies", "forward", "moments"]
