"""A full finetune of an encoder-decoder (T5, mT5) with a gated-GELU MLP under CUDA's autocast
(``amp-bf16``, ``amp-fp16``), without checkpointing or dropout: an encoder block's MLP going
back holds the peak — the last encoder block (the blocks below still keep everything, their
16-bit weight copies among it) or the first (every other weight gradient made). The fp32 and
16-bit step's counterpart is ``t5_first_mlp``; under autocast its ops differ.

transformers' ``T5DenseGatedActDense.forward`` runs ``wo(act(wi_0(x)) * wi_1(x))`` with
``act`` = ``NewGELUActivation``: ``0.5 * x * (1 + tanh(...))``; under autocast wi_0's output x
is 16-bit, ``0.5 * x`` stays 16-bit, ``pow`` runs in fp32 (CUDA's fp32 list) and promotes what
follows: ``1 + tanh`` and the GELU's output are fp32, so is the product. Going back (read op by
op off the trace, toy h 128, f 512, V 128, 2 + 3 blocks, 32 → 24 tokens, SGD):

- wo: its 16-bit weight gradient cast to the fp32 ``.grad`` (h·f·4 made), its 16-bit weight copy
  and input copy freed, its input gradient cast to fp32 (the product's dtype);
- the product's ``mul``: two fp32 s·b·f gradients; wi_1's cast to 16 bits, then wi_1's weight
  gradient made (fp32) and its input gradient cast to fp32 (s·b·h·4, waiting for wi_0's), its
  weight and input copies, its output and the GELU's output freed;
- GELU's last ``mul`` (16-bit ``0.5 * x`` by fp32 ``1 + tanh``): two fp32 s·b·f gradients beside
  the product's gradient to the GELU (fp32), and the first cast back to 16 bits (s·b·f·c) — the
  peak, the residual's fp32 gradient (s·b·h·4) beside it. On long inputs the product's ``mul``
  leads instead: it holds s·b·f·4 more and wi_1's h·f·(4 − c) + s·b·h·(4 − c) less.

It read 0.979 of the trace before (−326,688 B, the end of backward leading the estimate). No
torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, an encoder block's MLP under autocast (gelu_new)"


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``d``: the logits' dims (``t5.logit_dims``:
    s is the target's)."""
    from profiling.estimate.losses import REFERENCE
    from profiling.estimate.t5 import _encoder_block, _table

    if d is None or d.arch != "t5" or cfg.lora_rank is not None or cfg.checkpointing != "none":
        return []
    e, x = Bytes.of(cfg.precision), d.extra["t5"]
    if not e.amp or not _cuda(cfg) or not x["gated"] or cfg.dropout or cfg.loss != REFERENCE:
        return []
    if cfg.grads_kept or cfg.sharded or cfg.optimizer_in_bwd or cfg.compile:
        return []
    enc = Dims(**{**d.__dict__, "s": int(x["source_seq"])})
    T, h, f, c, q, w = enc.s * enc.b, d.h, d.f, e.c, int(x["q_dim"]), 4
    act = sum(ln.bytes for ln in lines if ln.category == "activations")
    grads = sum(ln.bytes for ln in lines if ln.category == "gradients")
    # not made yet at the block: wi_0's, the attention's, two norms', the position table's
    later = (h * f + 4 * h * q + 2 * h + int(x["rel_buckets"]) * d.a) * w
    # the block's own 16-bit weight copies (autocast's, saved by each mm)
    copies = (4 * h * q + 3 * h * f) * c
    block = _encoder_block(enc, e, cfg)
    # kept at GELU's last mul: the block less the MLP's freed (wo's input copy, the GELU's
    # fp32 output, wi_1's output, wi_1's input copy), the attention's and wi_0's weight
    # copies, and the encoder's int64 position buckets (the table's embedding backward)
    freed = T * f * (4 + 2 * c) + T * h * c
    kept = block - freed + (4 * h * q + h * f) * c + 8 * enc.s**2
    # in flight: three fp32 s·b·f, one 16-bit, wi_1's input gradient and the residual's
    # (fp32 s·b·h each), the loss's fp32 output and seed
    flight = 3 * T * f * 4 + T * f * c + 2 * T * h * 4 + 2 * 4
    # at the first block: the position bias's fp32 gradient from the blocks above, and one
    # accumulated fp32 residual gradient per block above the second (t5_first_mlp's)
    wait = (d.a * enc.s**2 * _table(e, cfg) + max(d.L - 2, 0) * T * h * 4) if d.L > 1 else 0
    first = fwd - act + grads - later + kept + flight + wait
    # the last block: the blocks below neither made their gradients nor freed their tensors
    below = (d.L - 1) * ((4 * h * q + 3 * h * f + 2 * h) * w - block - copies)
    value, which = max((first, "first"), (first - wait - below, "last"))
    # the other ops of the block's MLP going back, each beside what the last mul holds: wi_1's
    # weight gradient cast to fp32 (its 16-bit one alive, GELU's three fp32 s·b·f and one
    # 16-bit not yet); the product's mul with wi_1's output gradient cast to 16 bits (s·b·f·4 +
    # s·b·f·c more, wi_1's weight and input gradients, less their copies, not made yet); wo's
    # weight gradient cast, before that mul (toy h 256 at 32 tokens: −196,608 B; h 128 at 128
    # tokens: −131,072 B, with the last mul only)
    cast = h * f * c - 2 * T * f * 4 - T * f * c
    product = T * f * (4 + c) - (h * f + T * h) * (4 - c)
    wo = product - T * f * c + h * f * c - 2 * T * f * 4
    rise, at = max(
        (0, "GELU's last mul"), (cast, "wi_1's weight gradient cast"),
        (product, "the product's mul"), (wo, "wo's weight gradient cast"),
    )  # fmt: skip
    value += rise
    calc = (
        f"at the {which} encoder block, {at} (backward): end of forward less its activations "
        f"{fmt_bytes(fwd - act)} + the gradients {fmt_bytes(grads)} − those not made yet "
        f"(wi_0's h·f, the attention's 4·h·q, two norms', the position table's, fp32) "
        f"{fmt_bytes(later)} + the block's kept tensors and 16-bit weight copies, the position "
        f"buckets {fmt_bytes(kept)} + three fp32 s·b·f gradients, one s·b·f·{c}, two fp32 "
        f"s·b·h and the loss's output and seed {fmt_bytes(flight)}"
        + (
            f" + the position bias's gradient a·s²·4 and (L − 2) residual gradients s·b·h·4 "
            f"{fmt_bytes(wait)}"
            if which == "first" and wait
            else f" + the blocks below's kept tensors and weight copies, less their gradients "
            f"{fmt_bytes(-below)}"
            if which == "last"
            else ""
        )
        + (f" + at {at}, against GELU's last mul {fmt_bytes(rise)}" if rise else "")
        + f" = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
