"""A pipeline stage holding the embedding alone, in closed form.

torchtitan counts the embedding as one layer of the first stage when it splits the blocks
(``profiling.plans.layout.split_layers``), so few layers over many stages leave the first stage
no block: its forward is the lookup, its backward the embedding's weight gradient. The rest of
the closed form models a stage's actions from its blocks' (a block's transients in forward, a
block's gradient buffers in backward, FSDP2 gathering a block's group); here, as traced (torch's
``PipelineStage`` and FSDP2 on fake tensors, ``profiling.plans.trace``), the stage's moves above
what it keeps:

- forward: nothing without tensor parallelism (the output is what the stage keeps for its
  backward); under TP the vocabulary-sharded lookup (``RowwiseParallel`` on the embedding,
  sequence-parallel output) makes its whole-sequence partial output and, for its
  reduce-scatter along the sequence, a contiguous copy of it: two ``T·h·c`` beside the
  ``T/t·h·c`` it keeps. Under FSDP2 the first forward holds the embedding gathered twice (the
  all-gather's output and the parameter copied out of it, as a block's group).
- backward: the embedding's whole-vocabulary gradient in the compute dtype
  (``embedding_grad_rows``); under TP the gradient reaching it gathered to the whole sequence
  (without TP it is the received gradient, a receive buffer already counted). Under FSDP2 with
  mixed precision the first backward also makes the fp32 unsharded gradient the microbatches
  accumulate into, beside the 16-bit one (in fp32 the gradient made is that one).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, Vec, vec


def embedding_grad_rows(w: WorkloadConfig) -> int:
    """Rows of the first stage's unsharded embedding gradient on one rank: the whole
    vocabulary, even under tensor parallelism. torch's ``embedding_dense_backward_strategy``
    (torch/distributed/tensor/_ops/_embedding_ops.py) has no strategy sharded on the
    vocabulary: the row-wise embedding's weight gradient comes out ``Partial`` (sequence-
    sharded gradient in, every row out), and FSDP2 upcasts and accumulates it as it is
    (``FSDPParam.to_accumulated_grad_if_needed``), redistributing it to the vocabulary shard only
    at the reduction (``_get_grad_inner_tensor``, torch/distributed/fsdp/_fully_shard/
    _fsdp_param.py)."""
    return w.vocab  # without tensor parallelism the same: the whole embedding is local


def embedding_alone(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage, moves: dict[str, Move],
    sizes: tuple[int, int], unsharded: int,
) -> None:  # fmt: skip
    """``moves``' peaks (``F0 F B0 B``; ZBV's split backward is made from them), in place, where
    ``stage`` is a pipeline's stage of the embedding alone (see the module); ``sizes``: (tokens,
    the compute dtype's bytes); ``unsharded``: the first backward's unsharded gradients kept
    (FSDP's, in its reduce dtype)."""
    if layout.pp == 1 or stage.layers or stage.head:
        return
    (tokens, c), t, grad_rows = sizes, layout.tp, embedding_grad_rows(w)
    whole = tokens * w.hidden * c  # a hidden state of the whole local sequence
    lookup = 2 * whole if t > 1 else 0
    kept = moves["F"].delta["activations"]
    gathered = moves["F0"].delta.get("parameters", 0)  # the embedding gathered (FSDP2)
    moves["F0"] = Move(
        delta=moves["F0"].delta,
        peak=vec(parameters=2 * gathered, activations=kept, temporaries=lookup),
    )
    moves["F"] = Move(delta=moves["F"].delta, peak=vec(activations=kept, temporaries=lookup))
    grad = grad_rows * w.hidden * c + (whole if t > 1 else 0)
    later = vec(temporaries=grad)
    first: Vec = later
    if cfg.fsdp and cfg.precision == "mixed":  # the 16-bit gradient beside its fp32 copy
        upcast = vec(gradients=grad_rows * w.hidden * c, temporaries=unsharded)
        first = upcast if upcast["total"] > later["total"] else later
    moves["B0"] = Move(delta=moves["B0"].delta, peak=first)
    moves["B"] = Move(delta=moves["B"].delta, peak=later)


__all__ = ["embedding_alone", "embedding_grad_rows"]
