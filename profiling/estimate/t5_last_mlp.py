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
token); the frozen head kept no input. Read off the trace (t5-small toy: h 128, f 512, V 128,
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


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``d``: the logits' dims
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
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
