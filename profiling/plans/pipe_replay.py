"""A pipeline rank's step replayed through the caching allocator's model: what
``max_memory_reserved()`` holds on a GPU of that rank (``trace --counter reserved|nvml``).

The probes (``profiling.plans.probe``) measure each kind of action once and
``profiling.plans.profile.compose`` adds them up in the schedule's order: exact for the
allocated bytes, but the allocator's reserve depends on the order of every allocation and free
— one microbatch's checkpointed inputs between another's recomputed blocks, FSDP2's gathered
parameters kept from the first forward to the reduction — which no sum of actions has. Here
the rank's stages are built at their own block counts and torch's own schedule
(``Schedule1F1B``, ``ScheduleInterleaved1F1B``, ``ScheduleZBVZeroBubble``) runs two whole steps
of every microbatch on them, each followed by the optimizer step, as torchtitan's train step
does (pytorch/torchtitan torchtitan/trainer.py at b5bcd76: ``pp_schedule.step(...,
return_outputs=False)`` — the last stage keeps no microbatch's output for the step to return,
as the probes' ``save_forward_output=False`` —, then ``optimizers.step``); every allocation
and free is logged on the stream FSDP2 makes it on (``profiling.plans.streams``) and replayed
(``profiling.trace.allocations.replay_of``), as a plan without a pipeline is.

The fake world is one rank (the probes' rank 0); the schedule's order depends on the pipeline
position it is told (``PipelineStage.group_rank``), so each stage is told its rank's.
Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.trace.allocations import AllocationLog, Replay

Progress = Callable[[str], None]
STEPS = 2  # the first creates the optimizer's states; the second runs on what the first cached


def _schedule(layout: Layout, stages: list[Any], loss_fn: Any) -> Any:
    """torch's schedule of ``layout`` over this rank's ``stages``."""
    from torch.distributed.pipelining import (
        Schedule1F1B,
        ScheduleInterleaved1F1B,
        ScheduleZBVZeroBubble,
    )

    m = layout.microbatches
    if layout.schedule == "1f1b":
        return Schedule1F1B(stages[0], m, loss_fn=loss_fn, scale_grads=False)
    kind = ScheduleInterleaved1F1B if layout.schedule == "interleaved" else ScheduleZBVZeroBubble
    return kind(stages, m, loss_fn=loss_fn, scale_grads=False)


def _in_microbatch(forward: Callable[..., Any], tracker: Any) -> Callable[..., Any]:
    from profiling.plans.probe import _microbatch

    def run(*args: Any, **kwargs: Any) -> Any:
        with _microbatch(tracker):
            return forward(*args, **kwargs)

    return run


def _kept(forward: Callable[..., Any], outputs: list[Any]) -> Callable[..., Any]:
    """``forward`` keeping each output in ``outputs`` (torch 2.6's ``output_chunks`` on every
    stage: ``profiling.plans.profile.compose``)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        out = forward(*args, **kwargs)
        outputs.append(out)
        return out

    return run


def _run(
    cfg: TrainingConfig,
    w: WorkloadConfig,
    layout: Layout,
    pp_rank: int,
    mesh: DeviceMesh,
    log: AllocationLog,
) -> None:
    """Two steps of ``pp_rank``'s schedule, every allocation in ``log`` (see the module)."""
    from torch.distributed.pipelining import PipelineStage

    from profiling.plans.probe import (
        _forward_only,
        _inputs,
        _loss_context,
        _optimizer,
        _partitioned,
        build_stage,
    )
    from profiling.plans.titan import cross_entropy
    from profiling.trace.fake_world import static_shapes
    from profiling.trace.tracker import make_tracker

    held = [layout.stages[i] for i in layout.rank_stages[pp_rank]]
    models, pp_stages = [], []
    tokens = labels = None
    for stage in held:
        model = build_stage(cfg, w, layout, stage, stage.layers, mesh)
        x, y, mb_labels = _inputs(cfg, w, layout, stage)
        _partitioned(cfg, model, x)
        pp_stage = PipelineStage(model, stage.index, len(layout.stages), torch.device("cpu"),
                                 input_args=(x,), output_args=(y,),
                                 group=mesh.get_group("pp"))  # fmt: skip
        # the fake world is rank 0 of every group: the schedule's order is this rank's
        pp_stage.group_rank = pp_rank
        models.append(model)
        pp_stages.append(pp_stage)
        # the local batch, as a data loader hands it over: the schedule splits it
        if stage.embedding:
            tokens = torch.cat([x] * layout.microbatches)
        if stage.head:
            labels = torch.cat([mb_labels] * layout.microbatches)
    schedule = _schedule(layout, pp_stages, cross_entropy)
    static_shapes(schedule)
    root = torch.nn.ModuleList(models)
    optimizer = _optimizer(cfg, root)
    tracker = make_tracker(root, optimizer, tuple(t for t in (tokens, labels) if t is not None),
                           None, True)  # fmt: skip
    if layout.schedule == "zbv":  # its input-only backward runs autograd.grad
        _forward_only(tracker)
    log.attach(tracker)
    args = (tokens,) if tokens is not None else ()
    for pp_stage in pp_stages:
        # each stage's forward runs once per microbatch: inside a scope of its own, not as a
        # root called again (which torch's tracker refuses), as the probes run it
        pp_stage.forward_one_chunk = _in_microbatch(pp_stage.forward_one_chunk, tracker)
    kept: list[Any] = []
    if layout.keeps_outputs:
        for pp_stage in pp_stages:
            pp_stage.forward_one_chunk = _kept(pp_stage.forward_one_chunk, kept)
    with tracker, _loss_context(layout):
        for _ in range(STEPS):
            kept.clear()  # torch 2.6's clear_runtime_states, at the step's start
            # torch 2.6's step always merges the last stage's outputs (returned, dropped)
            schedule.step(*args, target=labels, return_outputs=layout.keeps_outputs)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tracker.reset_mod_stats()


def replay_rank(
    cfg: TrainingConfig,
    w: WorkloadConfig,
    layout: Layout,
    pp_rank: int,
    mesh: DeviceMesh | None,
    say: Progress,
) -> Replay:
    """The caching allocator's replay of ``pp_rank``'s step (see the module)."""
    from profiling.plans.streams import replayed

    assert mesh is not None, "a pipeline's mesh has a pp dimension"
    say(f"pipeline rank {pp_rank}, its whole step, for the caching allocator's replay")
    return replayed(cfg, lambda log: _run(cfg, w, layout, pp_rank, mesh, log))


__all__ = ["replay_rank"]
