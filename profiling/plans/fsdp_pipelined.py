"""FSDP2 under a pipeline: two moments of a stage's first forward and first backward that its
groups, not its blocks, decide (``profiling.plans.closed_form`` calls :func:`first_moves`; here
so that module stays within its lines). Read in torch 2.13's FSDP2
(torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, _fsdp_param.py) and in the trace's
live storages (``profiling.plans.probe`` on fake tensors).

- **The first forward, at a group's copy-out.** Under a pipeline no group reshards after
  forward, so the first forward gathers each group in turn and keeps it. ``wait_for_unshard``
  takes the previous group's all-gather result from ``comm_ctx.all_gather_state`` into a local
  variable (``prev_all_gather_state``, implicit prefetching in forward) and lets it go only as
  it returns: the previous group's all-gather output is alive while this group's output is
  copied out into its unsharded parameters. At group k: every group up to k gathered, the
  all-gather outputs of groups k-1 and k, and the activations made before group k. On a
  2-block first stage of hidden 256 over a 1,024-word vocabulary (PP 2 × FSDP 2, mixed) the
  last block's copy-out is 161,768 B above the moment the closed form had (a block's forward
  beside one all-gather output).
- **The first backward's end under mixed precision.** FSDP2 accumulates a pipeline's
  microbatches in fp32 (``reduce_dtype``): the first backward's post-backward of each group
  upcasts its 16-bit unsharded gradients one parameter at a time
  (``FSDPParam.to_accumulated_grad_if_needed``: the fp32 copy made, then the 16-bit gradient
  dropped). At the stage's last group (its first block; the output group on a stage of the
  head alone; the embedding on the first stage: ``pipelined_backward.embedding_last``) every
  other fp32 gradient exists, and at parameter k its 16-bit gradient beside its fp32 copy while
  the later ones are still 16-bit; the stage's output still held (the logits and the loss on
  the last stage, with ``autograd.backward``'s seed) and the gradient of its input made:
  1,046,504 B above the closed form's block moment on the last stage of the plan above.

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage
from profiling.plans.profile import Move, Vec, vec
from profiling.plans.shapes import Sizes, _shard, stage_tensors


def _groups(w: WorkloadConfig, stage: Stage, t: int) -> list[list[tuple[int, int]]]:
    """The stage's FSDP groups in forward order, each its tensors in parameter order: the
    embedding, each block, the final norm with the output (torchtitan's grouping)."""
    groups = [[(w.vocab // t, w.hidden)]] if stage.embedding else []
    groups += [stage_tensors(w, stage, 1, t)[:9]] * stage.layers
    return groups + ([[(w.hidden, 1), (w.vocab // t, w.hidden)]] if stage.head else [])


def copy_out_peak(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, kept: list[int], x: int,
    fp8_linear: int = 0,
) -> Vec:  # fmt: skip
    """The first forward's highest copy-out (see the module) above the forward's start:
    ``kept``: what each block keeps; ``x``: one hidden state (the input each group receives);
    ``fp8_linear``: bytes a block's Linears gather fewer under Float8's all-gather."""
    s, t = Sizes.of(cfg), cfg.tp
    sizes = [sum(_shard(d, r, n) * n for d, r in g) * s.gathered for g in _groups(w, stage, t)]
    first = int(stage.embedding)
    sizes = [b - (fp8_linear if first <= i < first + stage.layers else 0)
             for i, b in enumerate(sizes)]  # fmt: skip
    best = vec()
    for k in range(1, len(sizes)):
        blocks = min(k - first, stage.layers)  # the blocks before group k
        acts = sum(kept[:blocks]) + (x if stage.embedding else 0)
        moment = vec(parameters=sum(sizes[: k + 1]) + sizes[k - 1] + sizes[k], activations=acts)
        best = moment if moment["total"] > best["total"] else best
    return best


def upcast_end(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, sizes: tuple[int, int, int, int]
) -> Vec:
    """The first backward's end under mixed precision (see the module) above its start, on a
    stage without the embedding; ``sizes``: (the unsharded fp32 gradients it leaves, what it
    keeps per microbatch, one hidden state, the logits in the compute dtype)."""
    after, acts, x, logits = sizes
    if not (cfg.fsdp and cfg.precision == "mixed") or stage.embedding:
        return vec()
    last = _groups(w, stage, cfg.tp)[0]
    c, els = Sizes.of(cfg).gathered, [d * r for d, r in last]
    upcast = max(c * e - (4 - c) * sum(els[k + 1 :]) for k, e in enumerate(els))
    held = logits + 8 if stage.head else x  # the output (and the loss, the seed) still held
    return vec(gradients=after, activations=held - acts, temporaries=upcast + x)


def first_moves(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, moves: dict[str, Move],
    sizes: tuple[list[int], int, int, int, int, int],
) -> None:  # fmt: skip
    """``moves``' ``F0`` and ``B0`` peaks raised, in place, to the two moments of the module
    where higher, on a pipeline stage under FSDP; ``sizes``: (each block's kept bytes, one
    hidden state, the bytes a block's Linears gather fewer under Float8, the unsharded
    gradients the first backward leaves, what the stage keeps per microbatch, the logits).
    Not under --reshard-always, whose groups are resharded after each forward."""
    if not cfg.fsdp or cfg.pp == 1 or cfg.reshard_always:  # (always_pp has its own moves)
        return
    kept, x, fp8_linear, after, acts, logits = sizes
    for name, moment in (
        ("F0", copy_out_peak(cfg, w, stage, n, kept, x, fp8_linear)),
        ("B0", upcast_end(cfg, w, stage, (after, acts, x, logits))),
    ):
        if moment["total"] > moves[name].peak["total"]:
            moves[name] = Move(delta=moves[name].delta, peak=moment)


__all__ = ["copy_out_peak", "first_moves", "upcast_end"]
