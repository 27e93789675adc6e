"""A full finetune of an encoder-decoder (T5, mT5) under full checkpointing, in closed form:
the backward of its recomputed blocks, matching the trace of transformers'
``T5ForConditionalGeneration`` with every block of both stacks checkpointed (non-reentrant).

What the step keeps after forward is ``t5._ckpt_once``'s. In backward (``moments``), read op
by op from the trace as ``estimate.t5_ckpt`` reads LoRA's, with what a full finetune adds:
every weight's gradient made as backward passes it (the head's V·h, each block's, the final
norms', the embedding's V·h when the head is untied, the position tables'), and the gradient
of the position bias each stack's first block hands on (a·s² or a·t² in the tables' dtype),
summed over the blocks gone back until the first block takes it. A recomputed block's rise
above its start: its kept tensors (``t5``'s count of one block) less its input, then the
MLP going back — the output weight's gradient (h·f) and two N·f gradients — or, where it is
larger, the MLP's norm going back in fp32 (four N·h·4 gradients beside what the MLP kept is
freed: T5 v1.0's ReLU MLP keeps little). A first block makes its bucket indices (int64 n²),
its bias and, in the decoder, the zero cross-attention bias again. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from profiling.estimate import t5
from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.states import weight_bytes
from profiling.estimate.t5 import _table
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _block_params(d: Dims, decoder: bool) -> int:
    """One block's parameters: attention (cross-attention's too in the decoder), the MLP, the
    norms' weights."""
    h, q, mlp = d.h, int(d.extra["t5"]["q_dim"]), (3 if d.extra["t5"]["gated"] else 2) * d.h * d.f
    return (8 if decoder else 4) * h * q + mlp + (3 if decoder else 2) * h


def _rise(n: int, d: Dims, e: Bytes, cfg: TrainingConfig, kept: int) -> int:
    """A block's backward above its start: its kept tensors recomputed less its input (the
    checkpoint itself), then the larger of the MLP going back (wo's weight gradient and two
    N·f gradients) and the MLP's norm going back: what the MLP and the norm's output kept
    freed (its normalized values, its output and the residual's 16-bit N·h each), both MLP
    weights' gradients and the norm's made, four fp32 N·h gradients (rsqrt's N·4 freed).
    The norm leads only where d_ff < 1.7·d_model (no published T5: d_ff is 4·d_model or more)."""
    g = weight_bytes(cfg.precision)
    base = kept - n * d.h * e.r
    mlp = base + d.h * d.f * g + 2 * n * d.f * e.c
    kept_mlp = t5._mlp(n, d, e, cfg)
    outs = 2 if d.extra["t5"]["gated"] else 1
    norm = base - kept_mlp - 3 * n * d.h * e.c + (outs + 1) * d.h * d.f * g + d.h * g
    return max(mlp, norm + n * (16 * d.h - 4))


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """Backward under full checkpointing of a full finetune: each stack's highest recomputed
    block (name, bytes, calculation). ``d``: the logits' dims (``t5.logit_dims``: s is the
    target's); ``fwd``: the end of forward."""
    if d is None or d.arch != "t5" or cfg.checkpointing != "full" or cfg.lora_rank is not None:
        return []
    t, s = d.s, int(d.extra["t5"]["source_seq"])
    src = Dims(**{**d.__dict__, "s": s})
    e, T, U = Bytes.of(cfg.precision), s * d.b, t * d.b
    L, Ld, h, a = d.L, int(d.extra["t5"]["decoder_layers"]), d.h, d.a
    assert d.V is not None
    tb, g = _table(e, cfg), weight_bytes(cfg.precision)
    logits = U * d.V * e.c
    f_dec = t5._norm(U, src, e) + t5._casts(U, 1, src, e)  # the final norm's, the head's input
    f_enc = t5._norm(T, src, e)
    b_dec = (a * t * t * tb + a * t * s * e.c) if Ld > 1 else 0
    b_enc = a * s * s * tb if L > 1 else 0
    g_dec, g_enc = _block_params(src, True) * g, _block_params(src, False) * g
    head = d.V * h * g
    emb = 0 if d.extra["t5"]["tied"] else d.V * h * g
    k_dec, k_enc = t5._decoder_block(src, e, cfg), t5._encoder_block(src, e, cfg)
    r_dec, r_enc = _rise(U, src, e, cfg, k_dec), _rise(T, src, e, cfg, k_enc)
    top = fwd - logits - f_dec + U * h * e.r + head + h * g

    def dec(k: int) -> tuple[float, float]:
        acc = a * t * t * tb if k else 0  # the bias's gradient, summed over the blocks gone back
        start = top + k * g_dec + ((T * h * e.c - U * h * e.r) if k else 0) + acc
        if k < Ld - 1:
            return start, r_dec
        # the first block: the handed-on biases freed, its own made again with the buckets
        return start - b_dec, r_dec + a * t * s * e.c + 8 * t * t + a * t * t * tb - acc

    best = highest_block(Ld, dec)
    out = [("backward, a recomputed decoder block", best[0], _words(fwd, best[1], "t"))]
    tables = int(d.extra["t5"]["rel_buckets"]) * a * g
    enc_top = (fwd - logits - f_dec - Ld * U * h * e.r - b_dec - f_enc + T * h * e.r
               + Ld * g_dec + head + 2 * h * g + emb + tables - U * 8)  # fmt: skip

    def enc(k: int) -> tuple[float, float]:
        acc = a * s * s * tb if k else 0
        # below the top, one gradient more than the checkpoint freed (as the decoder's)
        start = enc_top + k * g_enc + ((acc - T * h * e.r) if k else 0)
        if k < L - 1:
            return start, r_enc
        return start - b_enc, r_enc + 8 * s * s + a * s * s * tb - acc

    best = highest_block(L, enc)
    out.append(("backward, a recomputed encoder block", best[0], _words(fwd, best[1], "s")))
    return out


def highest_block(n: int, at: Callable[[int], tuple[float, float]]) -> tuple[float, str]:
    """The highest of a stack's ``n`` recomputed blocks going back, top first (``at(k)``: the
    block with ``k`` blocks gone back before it, its start and its rise above it) and its
    calculation in words."""
    best: tuple[float, str] = (0.0, "")
    for k in range(n):
        start, rise = at(k)
        if start + rise > best[0]:
            words = f"block {n - k} of {n}: at its start {fmt_bytes(start)} + {fmt_bytes(rise)}"
            best = (start + rise, words)
    return best


def _words(fwd: float, block: str, n: str) -> str:
    return (f"end of forward {fmt_bytes(fwd)}, the loss's log-probabilities, the final norms' "
            "tensors and the checkpoints of the blocks gone back freed; the weights' gradients "
            "made so far, the position bias's summed gradient and the gradients reaching it "
            f"added; {block}: its kept tensors recomputed less its input and the MLP going back "
            f"(h·f weight gradient + 2·{n}·b·f·c) or its norm's (4·{n}·b·h·4)")  # fmt: skip
