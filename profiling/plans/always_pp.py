"""torchtitan's ``fsdp_reshard_after_forward = "always"`` (``--reshard-always``) under a pipeline,
in closed form: every FSDP group resharded after each microbatch's forward, gathered again by
its backward and kept gathered until the stage's next forward or its reduction.

torchtitan passes ``reshard_after_forward=True`` to the embedding's, every block's and the
[norm, output] group's ``fully_shard`` under "always", a pipeline or not (pytorch/torchtitan
torchtitan/distributed/fsdp.py at b5bcd76: ``get_fsdp_reshard_after_forward_policy`` returns
True for "always"; ``apply_fsdp_to_decoder``). torch's ``PipelineStage`` runs every backward
but the reduction with ``set_reshard_after_backward(False)`` and
``set_requires_gradient_sync(False)`` (torch 2.13, torch/distributed/pipelining/stage.py
``backward_maybe_with_nosync``) and reshards in ``perform_reduce_grad``. So what a stage holds
depends on what it ran last: a forward starts with its groups sharded (the step's first, or one
after a forward: ``F0``, ``F``) or gathered (after a backward: ``Fg``), and a backward with them
sharded (after a forward: ``B0``, ``Bs``) or gathered (after a backward: ``B``);
``profiling.plans.profile.compose`` picks each action's by what its stage ran before, and the
trace probes all six (``profiling.plans.probe.regathers``).

Every moment is the default policy's (``profile_of(stage, loss)``: the same stage with its
groups kept gathered all step, ``G`` bytes) with the parameters it holds there instead:

- a forward from sharded: at a block two copies of its group (its all-gather result, kept in
  ``all_gather_state`` until the next group's copy-out, beside the parameters copied out of
  it); at the output's forward the head's group twice; at the loss none (the head's group
  resharded after the output's forward);
- a forward from gathered: at block j the groups from j on (the earlier ones resharded after
  their forward, nothing gathered again): the first block's moment (the embedding resharded)
  or the last's (that block and the head's group), the output's (its group), the loss's (none);
- a backward from sharded: the loss's moment holds nothing gathered; the later ones hold at
  most every group (``G``) and one group's all-gather output in flight (``_backward_prefetch``
  issues the next group's when one's pre-backward runs): bounded so from above;
- a backward from gathered is the default's.

No torch here.
"""

from __future__ import annotations

from collections.abc import Callable

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import Move, StageProfile, Vec, add, vec
from profiling.plans.shapes import Sizes, _shard, stage_tensors


def always_on(cfg: TrainingConfig, pipelined: bool) -> bool:
    """Whether a pipeline's groups are resharded after every forward (see the module)."""
    return cfg.fsdp and cfg.reshard_always and pipelined


def _larger(*vs: Vec) -> Vec:
    best = vs[0]
    for v in vs[1:]:
        best = v if v["total"] > best["total"] else best
    return best


def always_profile(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, stage: Stage,
    profile_of: Callable[[Stage, bool], StageProfile],
) -> StageProfile:  # fmt: skip
    """The stage under "always" from its default profile (``profile_of(stage, loss)``: with
    the loss's transients or without them), see the module."""
    n, t, s = layout.shard_ranks, layout.tp, Sizes.of(cfg)
    g = s.gathered
    prof = profile_of(stage, True)
    big = prof.moves["F0"].delta["parameters"]  # G: every group gathered
    row = _shard(w.vocab // t, w.hidden, n) * n
    e = row * g if stage.embedding else 0
    h = (row + _shard(w.hidden, 1, n) * n) * g if stage.head else 0
    lb = sum(_shard(d, r, n) * n for d, r in stage_tensors(w, stage, 1, t)[:9]) * g
    lb = lb if stage.layers else 0
    tokens = layout.microbatch_size * cfg.seq_or_default() // layout.seq_shards
    forward, acts = prof.moves["F"], prof.moves["F"].delta["activations"]
    # the blocks' moments: the stage without its head (its last block's output kept as the
    # head's stage keeps it, as the final norm's input), and with one block (the first's)
    bare = stage.model_copy(update={"head": False})
    x = tokens // t * w.hidden * s.c
    logits = w.vocab // t * tokens * s.c  # PipelineStage keeps the stage's output
    # (moment, parameters from sharded, from gathered; None: no such moment)
    moments: list[tuple[Vec, int, int | None]] = []
    if stage.layers:
        blocks = profile_of(bare, True).moves["F"]
        one = profile_of(bare.model_copy(update={"layers": 1}), True).moves["F"].peak
        moments.append((blocks.peak, 2 * lb, lb + h))
        moments.append((one, 2 * lb, big - e))
        # the last block's copy-out: its group three times (the all-gather output, the
        # parameters copied out, the result kept), every earlier block's saved tensors
        kb_el = blocks.delta["activations"] // stage.layers
        moments.append((vec(activations=blocks.delta["activations"] - kb_el), 3 * lb, None))
    if stage.head:
        # the output's copy-out and forward: every saved tensor but the loss's
        # log-probabilities and loss (and at the copy-out the logits)
        out = vec(activations=acts - 4 * (w.vocab // t) * tokens - 8)
        # after a backward too its group is held twice there (the trace on a 65,536-row
        # output: the group's all-gather result beside it, though kept gathered)
        moments.append((out, 2 * h, 2 * h))
        # at the copy-out the group twice beside the larger of it (16-bit: the trace holds it
        # three times) and the last block's all-gather result (fp32: that)
        moments.append((add(out, vec(activations=-logits)), 2 * h + max(h, lb), None))
        moments.append((forward.peak, 0, 0))  # the loss (the default's highest there)
    if stage.embedding:  # its output beside its group twice (or every group still gathered)
        moments.append((vec(activations=x), 2 * e, big))
    if stage.embedding and not stage.layers:
        moments.append((forward.peak, 2 * e, e))
    sharded = _larger(*(add(m, vec(parameters=p)) for m, p, _ in moments))
    gathered = _larger(*(add(m, vec(parameters=q - big)) for m, _, q in moments if q is not None))
    held, dropped = vec(parameters=big), vec(parameters=-big)
    moves = dict(prof.moves)
    moves["F0"] = Move(delta=forward.delta, peak=sharded)
    moves["F"] = Move(delta=forward.delta, peak=sharded)
    moves["Fg"] = Move(delta=add(forward.delta, dropped), peak=gathered)
    # a backward from sharded (see the module)
    grad_b = 4 if cfg.precision == "mixed" else g
    mid = stage.model_copy(update={"embedding": False})
    blocks_b = profile_of(mid, False)  # the head's and the blocks' moments, no embedding's
    kb_el = 0  # what one block keeps
    if stage.layers:
        kb = profile_of(mid.model_copy(update={"head": False}), False).moves["F"].delta
        kb_el = kb["activations"] // stage.layers
    for name, b in (("B0", "B0"), ("Bs", "B")):
        bwd = prof.moves[b]
        dgrad = lb // g * grad_b if name == "B0" else 0
        cands = [bwd.peak]  # the loss's moment, nothing gathered (the default's there)
        if stage.layers:
            m = blocks_b.moves[b].peak
            ag_last = lb if stage.layers > 1 else e  # the next group's all-gather output
            # the default's moment at the last block and at the first: each earlier block's
            # makes one block's gradients more (a first backward) and holds what one keeps
            # less; off the last stage the first block's output gradient is a tensor of its
            # own, the last block's the receive buffer
            rise = (stage.layers - 1) * (dgrad - kb_el)
            rise += x if not stage.head and stage.layers > 1 else 0
            # ... bounded: the first block's moment may come before any of its saved tensors
            # are freed, with other buffers than the last one's (the trace: up to 5 hidden
            # states more on a 256-wide toy), so one block's saved tensors more
            rise += kb_el if stage.layers > 1 else 0
            last, first = (add(m, vec(temporaries=-rise)), m) if rise > 0 else (m, add(
                m, vec(temporaries=rise)))  # fmt: skip
            cands.append(add(last, vec(parameters=h + lb + ag_last)))
            cands.append(add(first, vec(parameters=big)))  # the embedding's in flight
            # the first block's copy-out in its pre-backward (its all-gather output beside its
            # parameters) after every later group's backward: that block's saved tensors (its
            # input the receive buffer or the embedding's output) and the stage's output (the
            # logits on the last) left, the later groups' gradients made, the input gradient
            left = kb_el + (0 if stage.embedding else -x) + (logits + 8 if stage.head else x)
            made = bwd.delta["gradients"] - dgrad - (e // g * grad_b if name == "B0" else 0)
            if not stage.embedding or lb > e:
                cands.append(vec(parameters=big - e + lb, activations=left - acts,
                                 gradients=made, temporaries=x))  # fmt: skip
        if stage.head:  # the output's weight gradient made, its group alone gathered
            log_probs = 4 * (w.vocab // t) * tokens
            h_el = h // g
            weight = vec(parameters=h, activations=-log_probs,
                         temporaries=logits + h_el * s.c + x)  # fmt: skip
            cands.append(weight)
            if name == "B0" and grad_b != s.c:  # its post-backward: the gradient upcast
                cands.append(vec(parameters=h, gradients=h_el * s.c, activations=-log_probs - x,
                                 temporaries=h_el * grad_b + x))  # fmt: skip
        if stage.embedding:
            out = 0 if stage.head else x
            # the embedding's backward: its whole-vocabulary gradient beside its output's
            grads = (w.vocab * w.hidden + tokens * w.hidden) * s.c
            emb = vec(activations=out - acts, temporaries=grads)
            cands.append(add(emb, vec(parameters=big)))
            if name == "B0":
                end = vec(
                    gradients=bwd.delta["gradients"],
                    activations=out - acts,
                    temporaries=w.vocab * w.hidden * s.c,
                )
                cands.append(add(end, vec(parameters=big)))
        moves[name] = Move(delta=add(bwd.delta, held), peak=_larger(*cands))
    return prof.model_copy(update={"moves": moves})


__all__ = ["always_on", "always_profile"]
