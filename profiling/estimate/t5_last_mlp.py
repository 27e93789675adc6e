"""LoRA on an encoder-decoder (T5, mT5) with its MLP's down frozen, no checkpointing: the last
decoder block's MLP going back can hold the step's peak where the vocabulary is small next to
the MLP (V 128 beside h 128, f 512): the loss's log-probabilities and the decoder's final norm
are freed by then, and the MLP's f-wide gradients are alive at once.

transformers' ``T5DenseGatedActDense.forward`` (models/t5/modeling_t5.py) runs
``wo(dropout(act(wi_0(x)) * wi_1(x)))``; going back, wo's input gradient (t·b·f) is alive while
``mul``'s backward makes both factors' (torch derivatives.yaml: ``mul``: ``grad * other``,
``grad * self``): three t·b·f gradients at once, whether or not up or gate carry an adapter
(theirs go back after). ``T5DenseActDense`` (ReLU) makes two: wo's input gradient and ReLU's
(``threshold_backward``). Beside them the residual's gradient reaching the block (t·b·h in the
residual's dtype); the frozen wo and wi saved no input (``mm`` saves its input only for a
weight needing a gradient). The model's dropout (``--dropout``, ``estimate.t5_dropout``): its
masks gone back already are freed (bool: the MLP's t·b·f, T5LayerFF's on wo's output and
T5Stack's after the final norm, t·b·h each), and the MLP's own dropout makes its gradient
before mul's (still three at once).

Freed by then: the loss's log-probabilities (its two scalars stay, the loop holds them) and
what the decoder's final ``T5LayerNorm`` kept under a frozen weight — ``pow``'s fp32 input (a
copy of a 16-bit residual), the residual ``hidden_states * rsqrt`` saved and rsqrt (4 B a
token); the frozen head kept no input.

In 16 bits (bf16, mixed: a 16-bit residual) the final norm's own backward can lead (T5 v1.0's
ReLU MLP makes only two t·b·f gradients): ``hidden_states * rsqrt`` multiplies the 16-bit
residual by an fp32 rsqrt, so its gradient to the residual waits in 16 bits (t·b·h·2) for the
variance's path, which goes back in fp32 — ``mean``'s expanded gradient and ``pow``'s backward
(derivatives.yaml ``pow_backward``: ``grad * exponent * self.pow(exponent - 1)``) over the fp32
copy ``pow`` kept: four t·b·h·4 tensors at once; the residual and rsqrt are freed by then, the
copy is not (the ReLU toy, tied, bf16 q, v: −12,288 B before, now equal).

Read off the trace (t5-small toy: h 128, f 512, V 128,
2 + 3 blocks, 32 input and 24 target tokens, fp32, LoRA q, v, SGD): 0.986 of it before
(−110,496 B), with up adapted −110,496 B, with dropout 0.1 −212,896 B; all now equal. Not
here: autocast (the product's fp32 casts and 16-bit weight copies going back), an adapted down
(its adapter goes back beside wo), checkpointing, other losses. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the last decoder block's MLP"
NORM = "backward, the decoder's final norm in 16 bits"


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The moments, or none where they do not apply. ``d``: the logits' dims
    (``t5.logit_dims``: s is the target's)."""
    from profiling.estimate.losses import REFERENCE

    if d is None or d.arch != "t5" or cfg.lora_rank is None or cfg.checkpointing != "none":
        return []
    e = Bytes.of(cfg.precision)
    if e.amp or "down" in cfg.lora_targets or cfg.loss != REFERENCE:
        return []
    U, h, f = d.s * d.b, d.h, d.f
    logits = U * int(d.V or 0) * e.c  # the log-probabilities (``t5._logits``, no autocast)
    copy = 0 if e.r == 4 else 4  # pow's fp32 copy of a 16-bit residual
    norm = U * ((copy + e.r) * h + 4)
    masks = U * (f + 2 * h) if cfg.dropout else 0
    n = 3 if d.extra["t5"]["gated"] else 2
    grads = U * h * e.r + n * U * f * e.c
    value = fwd - logits - norm - masks + grads
    calc = (
        f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities {fmt_bytes(logits)} − "
        f"the decoder's final norm's kept tensors t·b·(({copy} + {e.r})·h + 4) {fmt_bytes(norm)}"
        + (f" − the dropout masks gone back t·b·(f + 2h) {fmt_bytes(masks)}" if masks else "")
        + f" + the residual's gradient t·b·h·{e.r} and the MLP's {n} gradients "
        f"t·b·{n}f·{e.c} {fmt_bytes(grads)}"
        + f" = {fmt_bytes(value)}"
    )  # fmt: skip
    out = [(NAME, value, calc)]
    if e.r == 2:
        gone = U * (e.r * h + 4) + (U * h if cfg.dropout else 0)  # residual, rsqrt, mask
        at = fwd - logits - gone + U * h * 2 + 4 * U * h * 4
        out.append((NORM, at, (
            f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities "
            f"{fmt_bytes(logits)} − the norm's residual and rsqrt t·b·(h·2 + 4)"
            + (" and T5Stack's dropout mask t·b·h" if cfg.dropout else "")
            + f" {fmt_bytes(gone)} + the residual's 16-bit gradient t·b·h·2 and the variance's "
            f"four fp32 t·b·h·4 {fmt_bytes(U * h * 18)} = {fmt_bytes(at)}")))  # fmt: skip
    return out


__all__ = ["NAME", "NORM", "moments"]
