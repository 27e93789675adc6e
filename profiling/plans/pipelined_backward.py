"""A pipeline stage's backward at its highest, in closed form (``profiling.plans.closed_form``
calls it for each stage; here so that module stays within its lines).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.profile import Vec, add, vec


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


def pipelined_backward(
    extra: int, block_extra: int, recompute: int, grad_in: int, made: int, head: Vec | None,
    emb_moment: Vec, fresh: int = 0, blocks: bool = True, w2: tuple[int, ...] = (0, 0, 0),
) -> tuple[Vec, Vec]:  # fmt: skip
    """A stage's first backward at its highest (the last block's ``w2`` gradient made, its
    SwiGLU product freed, three FFN-wide buffers alive) and a later one's (a block's buffers,
    with ``w2``'s gradient made anew: ``fresh``, ``checkpoint_form.fresh_w2``); the loss
    (``extra``) first, then ``blocks`` beside ``head``; the embedding's last. Under tensor
    parallelism (``w2``: :func:`w2_sizes`) also a moment earlier, inside ``w2``'s backward:
    both gradients ``mm`` has just made beside the SwiGLU product, still saved, and the output
    gradient all-gathered to the whole sequence — higher where the rank's FFN width is below
    the hidden size (read in the trace's live tensors at PP 2 × TP 4: the first backward 0.968
    of the trace's, a later one 0.902)."""
    half = block_extra // 2
    first = vec(gradients=made, activations=recompute - half, temporaries=3 * half + grad_in)
    later = vec(temporaries=block_extra + grad_in + fresh, activations=recompute)
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


__all__ = ["pipelined_backward", "w2_sizes"]
