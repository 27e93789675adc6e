"""The head's moments in a plan's closed form without a pipeline: the forward's highest (the
last block or the loss) and, under torchtitan's ``fsdp_reshard_after_forward = "always"``
(``--reshard-always``), the output's forward and backward with its group gathered.

torchtitan shards [norm, output] as one FSDP group resharded after forward only under
"always" (pytorch/torchtitan torchtitan/distributed/fsdp.py at b5bcd76, apply_fsdp_to_decoder:
``reshard_after_forward=reshard_after_forward_policy == "always"``). Its default keeps the group
gathered from the output's forward to its backward, so the loss's forward and backward hold it;
"always" frees it after the output's forward (the trace: 16,777,216 B less at the loss's
backward, the peak, on a 8,192 × 1,024 output — the closed form's ``head_keep``, 0 there) and
FSDP2 gathers it again in the output's pre-backward. From there on a rank holds what it holds
under the default, so the moments are the default's, measured from a start without the group
(torch 2.13, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py; the trace's moments on a
65,536-row output, tests/profiling/plans/test_reshard_always.py):

- the output's forward: the group's all-gather result (kept in ``all_gather_state`` until the
  root's post-forward frees it) beside the parameters copied out of it, every saved tensor but
  the loss's log-probabilities, and the logits;
- the output's backward (its weight gradient made): the group gathered once (``wait_for_unshard``
  drops the all-gather result in backward), the logits' gradient, the last block's group
  prefetched (``_backward_prefetch``; the embedding's on a stage without blocks), the weight's
  gradient and the input's; the loss's log-probabilities freed;
- the group's post-backward (after the norm's backward): the weight's unsharded gradient, its
  reduce-scatter input in the reduce dtype and output (1/n of it), the prefetched group and the
  norm's input gradient.

Its all-gather in backward (the copy-in shard, the result, the copied-out parameters) is below
the output's backward whenever the prefetched group outweighs the final norm. No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, vec
from profiling.plans.shapes import Sizes, _shard, stage_tensors


def forward_peak(blocks: int, gathering: int, block_extra: int, head: Vec) -> Vec:
    """A forward without a pipeline at its highest: at the last block (every block's saved
    tensors, its group's gathered parameters twice, its transient) or at the loss."""
    at_blocks = vec(parameters=gathering, activations=blocks, temporaries=block_extra)
    return at_blocks if at_blocks["total"] > head["total"] else head


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def regathered_head(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, n: int, tokens: int, acts: int
) -> tuple[Vec, Vec]:  # fmt: skip
    """Under "always", on the stage with the head (else nothing): (the output's forward above
    the step's start, the highest of the output's backward and its group's post-backward above
    the backward's start), see the module. ``tokens`` the rank's, ``acts`` every tensor the
    forward saves (the loss's log-probabilities among them)."""
    if not (cfg.fsdp and cfg.reshard_always and stage.head):
        return vec(), vec()
    s, t, h = Sizes.of(cfg), cfg.tp, w.hidden
    g = s.gathered
    reduce_b = 4 if cfg.precision == "mixed" else g
    head_el = (_shard(w.vocab // t, h, n) + _shard(h, 1, n)) * n
    logits = w.vocab // t * tokens
    log_probs = 4 * logits  # the loss's, saved for its backward (head_activations)
    group = stage_tensors(w, stage, 1, t)[:9] if stage.layers else [(w.vocab // t, h)]
    prefetch = sum(_shard(d, r, n) * n for d, r in group) * g
    x_grad = tokens * h * s.c  # the output's input gradient (the whole sequence under TP)
    # (the all-gather result and the logits in the tracker's activations, as the trace has them)
    forward = vec(parameters=head_el * g,
                  activations=acts - log_probs - 8 + head_el * g + logits * s.c)  # fmt: skip
    weight = vec(
        parameters=head_el * g, activations=-log_probs,
        temporaries=logits * s.c + prefetch + w.vocab // t * h * s.c + x_grad,
    )  # fmt: skip
    reduce = vec(
        gradients=head_el * g, activations=-log_probs,
        temporaries=head_el * reduce_b + head_el * reduce_b // n + prefetch + x_grad,
    )  # fmt: skip
    return forward, _larger(weight, reduce)


__all__ = ["forward_peak", "regathered_head"]
