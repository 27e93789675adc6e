"""A pipeline stage's backward at its highest, in closed form (``profiling.plans.closed_form``
calls it for each stage; here so that module stays within its lines).

No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.float8_moments import float8_offsets
from profiling.plans.fresh_grads import first_block_end
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, add, vec
from profiling.plans.shapes import Sizes
from profiling.plans.tp_moments import tp_head_backward


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def w2_sizes(cfg: TrainingConfig, w: WorkloadConfig, tokens: int, grad_b: int) -> tuple[int, ...]:
    """What ``w2``'s own backward holds under tensor parallelism (``fsdp_moments.
    w2_backward_moment`` has the moment): (its output gradient all-gathered to the whole
    sequence, its weight gradient as ``mm`` makes it, that gradient as the stage's first
    backward keeps it, in ``grad_b``); none without TP or under Float8 (torchao's TP styles
    cast both)."""
    if cfg.tp == 1 or cfg.float8:
        return (0, 0, 0)
    c = 4 if cfg.precision == "fp32" else 2
    weight = (w.ffn // cfg.tp) * w.hidden
    return tokens * w.hidden * c, weight * c, weight * grad_b


def block_casts(
    cfg: TrainingConfig, w: WorkloadConfig, sizes: tuple[int, int, int], grad_b: int,
    plain: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """:func:`pipelined_backward`'s ``w2``, ``f8`` and ``end`` for a stage (``sizes``: tokens,
    t, the compute dtype's bytes; ``plain``: what a block saves unwrapped)."""
    end = first_block_end(cfg, w, sizes, Sizes.of(cfg).gathered, plain)
    if end is not None:  # w2's gradient is counted made from the block's start
        end = add(end, vec(gradients=-(w.ffn // sizes[1]) * w.hidden * grad_b))
    return {"w2": w2_sizes(cfg, w, sizes[0], grad_b), "f8": float8_offsets(cfg, w, sizes, grad_b),
            "end": end}  # fmt: skip


def pipelined_backward(
    extra: int, block_extra: int, recompute: int, grad_in: int, made: int, head: Vec | None,
    emb_moment: Vec, fresh: tuple[int, Vec | None] = (0, None), blocks: bool = True,
    w2: tuple[int, ...] = (0, 0, 0), f8: tuple[Vec, ...] = (), end: Vec | None = None,
    handed: int = 0,
) -> tuple[Vec, Vec]:  # fmt: skip
    """A stage's first backward at its highest (the last block's ``w2`` gradient made, its
    SwiGLU product freed, three FFN-wide buffers alive) and a later one's (a block's buffers,
    with ``w2``'s gradient made anew, and under FSDP's own reduce dtype the FFN's weight
    gradients kept to ``w1``'s backward: ``fresh``, ``checkpoint_form.fresh_w2``); the loss
    (``extra``) first, then ``blocks`` beside ``head``; the embedding's last. Under tensor
    parallelism (``w2``: :func:`w2_sizes`) also a moment earlier, inside ``w2``'s backward:
    both gradients ``mm`` has just made beside the SwiGLU product, still saved, and the output
    gradient all-gathered to the whole sequence — higher where the rank's FFN width is below
    the hidden size (read in the trace's live tensors at PP 2 × TP 4: the first backward 0.968
    of the trace's, a later one 0.902). Under Float8 (``f8``: ``float8_moments.float8_offsets``)
    also the recomputation's casts (a wrapped block: ``recompute`` above 0) and ``w3``'s and
    ``w1``'s backward casts. In a step's first backward also the block's end (``end``:
    ``fresh_grads.first_block_end``), every weight gradient it makes alive, the gradient the
    block above handed down (``handed``, of ``grad_in``; on the last stage the final norm's,
    ``head``'s temporary) freed by then (the trace's live storages: 16,384 B over at the
    lowest block of fp32 PP 4 × TP 2 × FSDP 2 with it)."""
    half = block_extra // 2
    first = vec(gradients=made, activations=recompute - half, temporaries=3 * half + grad_in)
    if end is not None:  # on the last stage the final norm's gradient (head's) freed too
        gone = handed + (head["temporaries"] if head is not None else 0)
        first = _larger(first, add(end, vec(gradients=made, activations=recompute,
                                            temporaries=grad_in - gone)))  # fmt: skip
    later = vec(temporaries=block_extra + grad_in + fresh[0], activations=recompute)
    if fresh[1] is not None:
        later = _larger(later, add(fresh[1], vec(activations=recompute, temporaries=grad_in)))
    if f8:
        start = vec(gradients=made, activations=recompute, temporaries=grad_in)
        start_later = vec(activations=recompute, temporaries=grad_in)
        fwd_first, fwd_later, casts_first, casts_later = f8
        if recompute > 0:
            first, later = (
                _larger(first, add(start, fwd_first)),
                _larger(later, add(start_later, fwd_later)),
            )
        first = _larger(first, add(start, casts_first))
        later = _larger(later, add(start_later, casts_later))
    gathered, mm, kept = w2
    if gathered:
        own = vec(activations=recompute, temporaries=half + grad_in + mm + gathered)
        first = _larger(first, add(own, vec(gradients=made - kept)))
        later = _larger(later, own)
    if head is not None:  # the head's saved tensors freed (checkpoint_form.head_freed)
        loss = vec(temporaries=extra)
        if not blocks:  # a stage of the head alone
            return loss, loss
        return _larger(loss, add(first, head)), _larger(loss, add(later, head))
    return first, _larger(later, emb_moment)


def head_backward(
    w: WorkloadConfig, stage: Stage, sizes: tuple[int, int, int], grad_b: int,
    peaks: tuple[Vec, Vec], split: bool = False,
) -> tuple[Vec, Vec]:  # fmt: skip
    """The last stage's first and later backward beside ``peaks`` (the other moments): the
    larger. Without tensor parallelism, inside the output projection's ``mm`` backward: the
    logits' gradient (in the compute dtype), the output's input gradient and its weight
    gradient (a temporary ``AccumulateGrad`` takes or adds in), the loss's fp32
    log-probabilities freed, the logits (the stage's output) still held — above the loss's own
    moment where ``hidden · (vocab + tokens)`` outweighs ``2 · tokens · vocab`` in fp32 (the
    trace's live storages at the peak, fp32 PP 2 with 128 tokens a microbatch, hidden 256,
    vocabulary 4,096: 131,072 B above the loss's). Under TP ``tp_moments.tp_head_backward``.
    ``sizes``: tokens, t, the compute dtype's bytes; ``grad_b``: the gradients' bytes;
    ``split``: ZBV's, whose input backward makes no weight gradient (``zbv_form`` has W's)."""
    tokens, t, c = sizes
    if t > 1 or not stage.head:
        return tp_head_backward(w, stage, sizes, grad_b, peaks, split)
    if split:
        return peaks
    logits = w.vocab * tokens
    out = vec(activations=-4 * logits,
              temporaries=logits * c + w.vocab * w.hidden * c + tokens * w.hidden * c)  # fmt: skip
    return _larger(peaks[0], out), _larger(peaks[1], out)


def embedding_last(after: int, freed: int, sizes: tuple[int, int, int], upcast: bool) -> Vec:
    """The first stage's first backward at its end (``after``: every gradient it leaves,
    ``freed``: the activations it lets go; ``sizes``: the embedding's weight in the compute
    dtype, what its backward holds, its gradient as kept): under mixed precision FSDP2's
    upcast, its 16-bit gradient beside every fp32 one; else the embedding's own backward, its
    gradient made beside every other (in fp32 the upcast's moment counted the gradient twice:
    4,063,232 B over on hidden 256, a 4,096-word vocabulary, 128 tokens)."""
    weight, held, grad = sizes
    if upcast:
        return vec(gradients=after, activations=freed, temporaries=weight)
    return vec(gradients=after - grad, activations=freed, temporaries=held)


__all__ = [
    "block_casts", "embedding_last", "head_backward", "pipelined_backward", "w2_sizes",
]  # fmt: skip
