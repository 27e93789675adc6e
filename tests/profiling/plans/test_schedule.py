"""The pipeline orders the estimate uses (a port, no torch) are torch's own, rank by rank.

1F1B is run for real: torch's Schedule1F1B steps a one-layer stage on every rank of a fake
process group, and the order in which it calls the stage's forward, backward and reduction is
recorded. The multi-stage schedules (interleaved 1F1B, ZBV) are read from the orders torch's
schedule classes compute for every rank, with torch's own REDUCE_GRAD placement.
"""

from __future__ import annotations

import itertools

import pytest

from profiling.plans.schedule import Action, interleaved, one_f_one_b, zbv

torch = pytest.importorskip("torch")


def _torch_1f1b(rank: int, pp: int, m: int) -> list[Action]:
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from profiling.trace.fake_world import static_shapes

    dist.init_process_group("fake", rank=rank, world_size=pp, store=FakeStore())
    try:
        x = torch.zeros(1, 4, requires_grad=rank > 0)
        y = torch.zeros(1, 4, requires_grad=rank < pp - 1)
        stage = PipelineStage(nn.Linear(4, 4), rank, pp, torch.device("cpu"),
                              input_args=(x,), output_args=(y,))  # fmt: skip
        schedule = Schedule1F1B(stage, m, loss_fn=lambda out, target: out.sum())
        # The fake process group carries no values: the stages' vote on how to learn each
        # other's shapes cannot run, and the shapes are given.
        static_shapes(schedule)
        seen: list[Action] = []
        forward, backward, reduce = (stage.forward_one_chunk, stage.backward_one_chunk,
                                     stage.perform_reduce_grad)  # fmt: skip

        def fwd(i, *args, **kwargs):
            seen.append(Action(rank, "F", i))
            return forward(i, *args, **kwargs)

        def bwd(i, *args, **kwargs):
            seen.append(Action(rank, "B", i))
            return backward(i, *args, **kwargs)

        def red(*args, **kwargs):
            seen.append(Action(rank, "R", -1))
            return reduce(*args, **kwargs)

        # torch's stage calls these by name: the instance's own, recording then calling torch's
        for name, f in dict(
            forward_one_chunk=fwd, backward_one_chunk=bwd, perform_reduce_grad=red
        ).items():
            setattr(stage, name, f)  # fmt: skip
        inputs = torch.zeros(m, 4)
        if rank == 0:
            schedule.step(inputs)
        elif rank == pp - 1:
            schedule.step(target=inputs)
        else:
            schedule.step()
        return seen
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(("pp", "m"), [(2, 2), (2, 5), (4, 4), (4, 8), (3, 7)])
def test_1f1b_is_torchs(pp: int, m: int) -> None:
    for rank in range(pp):
        assert one_f_one_b(rank, pp, m) == _torch_1f1b(rank, pp, m), (rank, pp, m)


def _torch_multi(cls_name: str, rank: int, pp: int, v: int, m: int) -> list[Action]:
    from torch.distributed.pipelining import schedules

    cls = getattr(schedules, cls_name)
    sched = object.__new__(cls)
    sched.pp_group_size = pp
    sched.n_local_stages = v
    sched._n_microbatches = m
    sched.num_stages = pp * v
    sched.number_of_rounds = max(1, m // pp)
    sched.microbatches_per_round = m // sched.number_of_rounds
    ops = schedules._add_reduce_grad(sched._calculate_single_rank_operations(rank), m)
    kinds = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "I",
             "BACKWARD_WEIGHT": "W", "REDUCE_GRAD": "R"}  # fmt: skip
    out = []
    for a in ops:
        if a is None:
            continue
        kind = kinds[a.computation_type.name]
        index = -1 if kind == "R" or a.microbatch_index is None else a.microbatch_index
        out.append(Action(a.stage_index, kind, index))  # type: ignore[arg-type]  # one of Kind
    return out


@pytest.mark.parametrize(
    ("pp", "v", "m"), [(2, 2, 2), (2, 2, 4), (4, 2, 8), (4, 3, 8), (4, 2, 3), (8, 2, 32), (3, 2, 6)]
)
def test_interleaved_is_torchs(pp: int, v: int, m: int) -> None:
    for rank in range(pp):
        mine = interleaved(rank, pp, v, m)
        assert mine == _torch_multi("ScheduleInterleaved1F1B", rank, pp, v, m), (rank, pp, v, m)
        # every microbatch runs forward and backward once on each of the rank's stages
        assert sum(a.kind == "F" for a in mine) == v * m == sum(a.kind == "B" for a in mine)


@pytest.mark.parametrize(("pp", "m"), list(itertools.product((2, 3, 4, 8), (1, 3, 8, 16))))
def test_zbv_is_torchs(pp: int, m: int) -> None:
    for rank in range(pp):
        mine = zbv(rank, pp, m)
        assert mine == _torch_multi("ScheduleZBVZeroBubble", rank, pp, 2, m), (rank, pp, m)
        assert sum(a.kind == "W" for a in mine) == 2 * m
