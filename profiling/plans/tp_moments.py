"""A pipeline stage under tensor parallelism, in closed form: two moments of torchtitan's
sequence-parallel collectives the trace shows and a block that keeps everything has not
(``profiling.plans.closed_form`` calls them; here so that module stays within its lines).

- **w2's reduce-scatter in forward** (no checkpointing): ``w2`` is ``RowwiseParallel`` with a
  ``Shard(1)`` output, so DTensor turns its partial sum over the whole sequence into the
  sequence shard through a contiguous copy of that partial (``Partial`` → ``Shard(1)`` on a
  dimension other than 0), the reduce-scatter's output and its contiguous copy back in
  ``(batch, seq, hidden)`` order — all beside everything the stage keeps by then, its own
  output not yet made (under full checkpointing ``checkpoint_form.wrapped_forward`` has it).
- **the output projection under TP** (the last stage): in forward its input, the final
  norm's sequence-sharded output, all-gathered to the whole sequence (the gathered buffer and
  ``cat``'s copy, ``ColwiseParallel(input_layouts=Shard(1))``) beside the norm's input, output
  and rstd; in backward the gradient of that input over the whole sequence, its contiguous
  copy and its reduce-scatter back to the sequence shard, with the loss's fp32
  log-probabilities and the gathered input freed but the logits (the stage's output, which
  ``PipelineStage`` keeps until the stage's backward is done), the norm's input and rstd
  still held, and in a step's first backward the output's weight gradient made.

Read from the trace's live storages at each move's peak on PP 2 × TP 4 (Llama-shaped h 1024,
f 2816, 4 blocks, vocab 256, seq 512 × 6 in 2 microbatches, no checkpointing): stage forward
0.862 / 0.943 and the last stage's backward 0.911 / 0.907 of the trace before.

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, vec


def tp_forward(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, acts: int, head_acts: int,
    sizes: tuple[int, int, int],
) -> Vec:  # fmt: skip
    """A pipeline stage's forward at w2's reduce-scatter in its last block, or on the last
    stage at the output's all-gather (see the module); ``acts``: what the stage keeps per
    microbatch (``head_acts`` of it the head's); ``sizes``: tokens, t, the compute dtype's
    bytes. Nothing without TP, with checkpointing (its own moments), compiled or Float8."""
    tokens, t, c = sizes
    if t == 1 or cfg.checkpointing != "none" or cfg.compile or cfg.float8 or not stage.layers:
        return vec()
    x, gathered = tokens // t * w.hidden * c, tokens * w.hidden * c
    # not yet made: the head's tensors, or the stage's output
    held = acts - (head_acts if stage.head else x) + 2 * gathered + 2 * x
    return vec(activations=held + (4 * tokens // t if stage.head else 0))  # and the norm's rstd


def tp_head_backward(
    w: WorkloadConfig, stage: Stage, sizes: tuple[int, int, int], grad_b: int,
    peaks: tuple[Vec, Vec], split: bool = False,
) -> tuple[Vec, Vec]:  # fmt: skip
    """The last stage's first and later backward with the output's input gradient
    reduce-scattered (see the module), beside ``peaks`` (the other moments): the larger.
    ``grad_b``: the gradients' bytes per element; ``split``: ZBV's input backward, which makes
    no weight gradient."""
    tokens, t, c = sizes
    if t == 1 or not stage.head:
        return peaks
    x, gathered = tokens // t * w.hidden * c, tokens * w.hidden * c
    freed = 4 * w.vocab * tokens // t + gathered  # the fp32 log-probabilities, the gathered input
    later = vec(activations=-freed, temporaries=2 * gathered + x)
    first = vec(gradients=w.vocab // t * w.hidden * grad_b, activations=-freed,
                temporaries=2 * gathered + x)  # fmt: skip
    if not split:  # the output's mm: in a first backward too (its gradient made as the .grad)
        first = _larger(first, _fresh_output(w, tokens, t, c))
        later = _larger(later, _fresh_output(w, tokens, t, c))
    return _larger(peaks[0], first), _larger(peaks[1], later)


def _fresh_output(w: WorkloadConfig, tokens: int, t: int, c: int) -> Vec:
    """A later backward's output ``mm``: the output weight's gradient made anew (under FSDP2's
    own reduce dtype it stays the ``.grad`` until the group's ``post_backward``:
    ``profiling.plans.fresh_grads``; else ``AccumulateGrad`` adds it in after) beside the
    output's input gradient (the whole sequence) and the logits' gradient in the compute
    dtype, the loss's fp32 log-probabilities freed — PP 4 × TP 2 × FSDP 2 (32 tokens a
    microbatch, a 4,096-word vocabulary) the last stage's later backward 146,396 B (mixed) and
    1,342,428 B (fp32, rank 3 at 0.914) below the trace before, read in its live storages."""
    logits, weight = w.vocab // t * tokens, w.vocab // t * w.hidden
    return vec(activations=-4 * logits, temporaries=(logits + weight + tokens * w.hidden) * c)


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


__all__ = ["tp_forward", "tp_head_backward"]
