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
its bias and, in the decoder, the zero cross-attention bias again.

Under autocast (read from the trace the same way): the log-probabilities are fp32 and the
head's 16-bit weight copy goes with them; the encoder's output and its gradient are fp32; a
recomputed block's matmuls save 16-bit copies of its weights again (autocast's cache is gone
outside the forward); the gated MLP goes back in fp32 from its product on (wo's input gradient
cast to fp32, both factors' fp32 gradients); and the recomputation's own end can lead: the
MLP's 16-bit output gradient (made by the residual's add before the recomputation starts), the
MLP's norm's fp32 output and, on ReLU, T5's fp32 cast of its output, which the forward's
locals hold until the recomputation stops at wo's input copy. No torch here.
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


def _copies(d: Dims, decoder: bool) -> int:
    """Under autocast, the 16-bit copies of a recomputed block's weights its matmuls save for
    backward (no cache outside autocast: each made again), but wo's, freed by the moment its
    MLP's input gradients are made."""
    h, q, mlp = d.h, int(d.extra["t5"]["q_dim"]), (2 if d.extra["t5"]["gated"] else 1) * d.h * d.f
    return 2 * ((8 if decoder else 4) * h * q + mlp)


def _rise(n: int, d: Dims, e: Bytes, cfg: TrainingConfig, kept: int, decoder: bool) -> int:
    """A block's backward above its start: its kept tensors recomputed less its input (the
    checkpoint itself), then the larger of the MLP going back (wo's weight gradient and two
    N·f gradients) and the MLP's norm going back: what the MLP and the norm's output kept
    freed (its normalized values, its output and the residual's 16-bit N·h each), both MLP
    weights' gradients and the norm's made, four fp32 N·h gradients (rsqrt's N·4 freed).
    The norm leads only where d_ff < 1.7·d_model (no published T5: d_ff is 4·d_model or more)."""
    g = weight_bytes(cfg.precision)
    base = kept - n * d.h * e.r
    mlp = base + d.h * d.f * g + 2 * n * d.f * e.c
    if e.amp and d.extra["t5"]["gated"]:
        base += _copies(d, decoder)
        # wo's 16-bit input copy freed; its input gradient cast to the fp32 product's dtype,
        # and the product's two factors' fp32 gradients
        mlp = base - n * d.f * e.c + d.h * d.f * g + 3 * n * d.f * 4
    elif e.amp:
        base += _copies(d, decoder)
        # ReLU: wo's input copy freed, its input gradient cast to fp32 (T5's cast going back)
        # and back to 16 bits — below the recomputation's end (``_recomputed``) by 6·N·h − 2·h·f
        mlp = base + n * d.f * 4 + d.h * d.f * g
    kept_mlp = t5._mlp(n, d, e, cfg)
    outs = 2 if d.extra["t5"]["gated"] else 1
    norm = base - kept_mlp - 3 * n * d.h * e.c + (outs + 1) * d.h * d.f * g + d.h * g
    return max(mlp, norm + n * (16 * d.h - 4))


def _recomputed(n: int, d: Dims, e: Bytes, kept: int, decoder: bool) -> int:
    """Under autocast, a block's recomputation at its end (its last saved tensor, wo's input
    copy, made) above its start: its kept tensors less its input, every weight's 16-bit copy,
    the MLP's output gradient cast to 16 bits (the residual's add gave it before the
    recomputation), the MLP's norm's fp32 output and, on ReLU, its fp32 cast of the ReLU's
    output (T5 casts it to wo's dtype), which the forward's locals hold; 0 without autocast."""
    if not e.amp:
        return 0
    relu = 0 if d.extra["t5"]["gated"] else n * d.f * 4
    held = n * d.h * (e.c + 4) + relu + d.h * d.f * e.c
    return kept - n * d.h * e.r + _copies(d, decoder) + held


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
    o = 4 if e.amp else e.c  # the encoder's output's (and its gradient's) bytes
    # the log-probabilities (fp32 under autocast) and the head's 16-bit weight copy freed
    logits = U * d.V * (4 if e.amp else e.c) + (d.V * h * 2 if e.amp else 0)
    f_dec = t5._norm(U, src, e) + t5._casts(U, 1, src, e)  # the final norm's, the head's input
    f_enc = t5._norm(T, src, e) + (T * h * 4 if e.amp else 0)  # autocast: its fp32 output too
    b_dec = (a * t * t * tb + a * t * s * e.c) if Ld > 1 else 0
    b_enc = a * s * s * tb if L > 1 else 0
    g_dec, g_enc = _block_params(src, True) * g, _block_params(src, False) * g
    head = d.V * h * g
    emb = 0 if d.extra["t5"]["tied"] else d.V * h * g
    k_dec, k_enc = t5._decoder_block(src, e, cfg), t5._encoder_block(src, e, cfg)
    r_dec, r_enc = _rise(U, src, e, cfg, k_dec, True), _rise(T, src, e, cfg, k_enc, False)
    end_dec, end_enc = _recomputed(U, src, e, k_dec, True), _recomputed(T, src, e, k_enc, False)
    top = fwd - logits - f_dec + U * h * e.r + head + h * g

    def dec(k: int) -> tuple[float, float]:
        acc = a * t * t * tb if k else 0  # the bias's gradient, summed over the blocks gone back
        start = top + k * g_dec + ((T * h * o - U * h * e.r) if k else 0) + acc
        if k < Ld - 1:
            return start, max(r_dec, end_dec)
        # the first block: the handed-on biases freed, its own made again with the buckets
        # (its bias alive until the recomputation ends; its gradient summed by the MLP's turn)
        first = a * t * s * e.c + 8 * t * t + a * t * t * tb
        return start - b_dec, max(r_dec - acc, end_dec) + first

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
            return start, max(r_enc, end_enc)
        return start - b_enc, max(r_enc - acc, end_enc) + 8 * s * s + a * s * s * tb

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
