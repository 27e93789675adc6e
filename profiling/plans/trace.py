"""A plan traced: one rank of each kind, under fake tensors, on a fake world of the plan's shape.

Every GPU of one pipeline rank holds the same memory, so a plan has at most ``pp`` distinct
ranks; and their stages are of at most three kinds — the first (the embedding and its blocks),
the middle ones (blocks only) and the last (blocks, the final norm, the output and the loss).
Each kind is traced once (``profiling.plans.probe``: torch's ``PipelineStage``, FSDP2, tensor
parallelism on a ``DeviceMesh`` of the plan's full shape, as a rank of that kind: a fake process
group's rank in that pipeline position), at 1, 2 and 3 blocks: every number the probe reports is
affine in the stage's block count, fitted on the first two and checked to the byte on the third
(else traced at 2, 3, 4, else at the stage's own count). Each pipeline rank's memory is then its
stages' actions in torch's schedule order (``profiling.plans.profile.compose``).

The cost is that of three stages of at most four blocks, whatever the world size: the mesh's
shape enters only through the fake process group (``profiling.trace.fake_world`` keeps FSDP2's
sharding from growing with it). Imports torch.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage, layout_of
from profiling.plans.model import plan_workload
from profiling.plans.probe import partitions_shared
from profiling.plans.profile import Move, RankMemory, StageProfile, Vec
from profiling.plans.result import PlanResult, plan_notes
from profiling.plans.ring_stage import highest_ring_rank
from profiling.trace.allocations import Replay, counted
from profiling.trace.fake_world import fake_world, mesh_of

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

Progress = Callable[[str], None]
SAMPLES = ((1, 2, 3), (2, 3, 4))


def _probe(
    cfg: TrainingConfig,
    w: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    layers: int,
    mesh: DeviceMesh | None,
    say: Progress,
) -> StageProfile:
    """One probe of ``stage`` with ``layers`` blocks on the trace's fake world."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiling.plans.probe import probe_pipelined, probe_whole
    from profiling.trace.target import kernels

    say(f"stage {stage.index} ({stage.kind}), {layers} block{'s' * (layers != 1)}")
    try:
        with FakeTensorMode(allow_non_fake_inputs=False), kernels(cfg.target):
            if layout.pp > 1:
                assert mesh is not None, "a pipeline's mesh has a pp dimension"
                return probe_pipelined(cfg, w, layout, stage, layers, mesh, say)
            return probe_whole(cfg, w, layout, stage, layers, mesh, say)
    except ProfilingError:
        raise
    except Exception as exc:
        from profiling.trace.build import _fake_failure

        raise ProfilingError(_fake_failure(cfg.model, exc)) from None


def _replay(
    cfg: TrainingConfig,
    w: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    mesh: DeviceMesh | None,
    say: Progress,
) -> Replay:
    """The caching allocator's reserve for a GPU of a plan without pipeline: its stage traced at
    its own block count, both steps' allocations and frees replayed, each on the stream FSDP2
    makes it on (``profiling.plans.streams``)."""
    from profiling.plans.probe import probe_whole
    from profiling.plans.streams import replayed

    say(f"stage {stage.index}, all {stage.layers} blocks, for the caching allocator's replay")
    return replayed(
        cfg, lambda log: probe_whole(cfg, w, layout, stage, stage.layers, mesh, say, log)
    )


def _vectors(p: StageProfile) -> dict[str, Vec]:
    out: dict[str, Vec] = {"base": p.base, "per_mb": p.per_microbatch,
                           "io": {"output": p.output_bytes, "input": p.input_bytes}}  # fmt: skip
    for name, move in p.moves.items():
        out[f"{name}.delta"], out[f"{name}.peak"] = move.delta, move.peak
    return out


def _at(
    samples: dict[int, StageProfile], counts: tuple[int, int, int], layers: int
) -> StageProfile | None:
    """The profile at ``layers`` blocks, affine from the first two samples; None when the third
    misses by a byte."""
    n1, n2, n3 = counts
    v1, v2, v3 = (_vectors(samples[n]) for n in counts)
    if set(v1) != set(v2) or set(v1) != set(v3):
        return None
    step = n2 - n1  # a block, or a period of every-N checkpointing

    def line(name: str, n: int) -> Vec:
        a, b = v1[name], v2[name]
        return {k: a.get(k, 0) + (n - n1) // step * (b.get(k, 0) - a.get(k, 0)) for k in {*a, *b}}

    for name in v1:
        if any(
            line(name, n3).get(k, 0) != v3[name].get(k, 0) for k in {*line(name, n3), *v3[name]}
        ):
            return None
    moves = {
        m: Move(delta=line(f"{m}.delta", layers), peak=_lowest(samples, counts, m, line, layers))
        for m in samples[n1].moves
    }
    first = samples[n1]
    return StageProfile(stage=first.stage, layers=layers, base=line("base", layers),
                        moves=moves, per_microbatch=line("per_mb", layers),
                        output_bytes=line("io", layers)["output"],
                        input_bytes=line("io", layers)["input"])  # fmt: skip


def _lowest(
    samples: dict[int, StageProfile], counts: tuple[int, int, int], move: str,
    line: Callable[[str, int], Vec], layers: int,
) -> Vec:  # fmt: skip
    """A move's peak at ``layers`` blocks: its line, or higher, the line of its peak from the
    stage's lowest block on (``probe._lowest_block_split``) through the two larger samples.
    A peak is the highest of moments each affine in the blocks: above its line past the
    samples where a moment that grows faster (the lowest block's, beside every gradient made
    above it) overtakes the one that led them — an fp32 PP 2 stage of 4 blocks was traced
    456,144 B below its own count's peak from samples of 1-3 blocks, the output's backward
    leading there. Both lines are below the peak, whichever leads (a peak is convex in the
    blocks), so the higher is the nearer."""
    peak = line(f"{move}.peak", layers)
    _, n2, n3 = counts
    low2, low3 = samples[n2].lower.get(move), samples[n3].lower.get(move)
    if low2 is None or low3 is None:
        return peak
    low = {k: low3.get(k, 0) + (layers - n3) // (n3 - n2) * (low3.get(k, 0) - low2.get(k, 0))
           for k in {*low2, *low3}}  # fmt: skip
    return low if low["total"] > peak["total"] else peak


def _stage_profile(
    cfg: TrainingConfig,
    w: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    cache: dict[tuple[str, int, int], StageProfile],
    mesh: DeviceMesh | None,
    say: Progress,
    notes: list[str],
) -> StageProfile:
    """The stage's profile at its own block count: from probes of its kind at 1-4 blocks."""

    every = cfg.checkpoint_every if cfg.checkpointing == "full" else None
    period = every or 1
    # every N-th block checkpointed: sampled in whole periods, the stage's pattern kept
    phase = (stage.before + stage.layers) % period

    def probe(n: int) -> StageProfile:
        key = (stage.kind, n, phase)
        if key not in cache:
            cache[key] = _probe(cfg, w, layout, stage, n, mesh, say)
        return cache[key]

    rest = stage.layers % period
    samples = [(rest + period * a, rest + period * b, rest + period * c) for a, b, c in SAMPLES]
    if stage.layers <= samples[0][-1]:
        return probe(stage.layers).model_copy(update={"stage": stage.index})
    for counts in samples:
        found = _at({n: probe(n) for n in counts}, counts, stage.layers)
        if found is not None:
            return found.model_copy(update={"stage": stage.index})
    notes.append(
        f"stage {stage.index}: its numbers did not scale exactly with its blocks: traced whole"
    )
    return probe(stage.layers).model_copy(update={"stage": stage.index})


def trace_plan(
    cfg: TrainingConfig, progress: Progress | None = None, every_ring_rank: bool = False
) -> PlanResult:
    """Trace ``cfg``'s plan (see the module): every pipeline rank's memory. ``every_ring_rank``:
    from cp 3 on, ring rank 0 traced too (at cp 2 always), each kept in ``ring_ranks``."""
    from profiling.trace.bounded import checked_progress
    from profiling.trace.build import _require_tracing_apis

    _require_tracing_apis()
    w = plan_workload(cfg)
    if cfg.offload_optimizer:  # fake tensors have no host memory to pin (plans.cpu_offload)
        raise ProfilingError(
            "FSDP2's CPU offload (--offload-optimizer on a plan) is estimated, not traced: "
            "estimate it ('journal-agent estimate' with the same flags), or trace without it"
        )
    if cfg.seq is None:
        cfg = cfg.model_copy(update={"seq": cfg.seq_or_default()})
    layout = layout_of(cfg, w.layers)
    say = checked_progress(progress)
    start = time.perf_counter()
    notes = plan_notes(cfg, layout)
    runs: dict[int, tuple[list[StageProfile], dict[int, Replay], set[int], int]] = {}

    def profiles_of(ring_rank: int) -> list[StageProfile]:
        runs[ring_rank] = _traced(cfg, w, layout, ring_rank, say, notes)
        return runs[ring_rank][0]

    # one place on the ring, but at cp 2 both (ring rank 0 keeps more, rank 1 holds more at
    # the ring: profiling.plans.ring_stage.highest_ring_rank)
    places: dict[int, list[RankMemory]] = {}
    every = every_ring_rank or layout.cp == 2
    ranks, profiles = highest_ring_rank(layout, profiles_of, places if every else None)
    _, replays, traced, kinds = next(run for run in runs.values() if run[0] is profiles)
    notes.append(
        f"traced: {kinds} stage kind(s) at {', '.join(map(str, sorted(traced)))} "
        f"block(s) each, as one rank of a fake world of {layout.world:,} ranks; every stage "
        "at its own block count by exact affine scaling"
        + (" (ring ranks 0 and 1, the higher per pipeline rank)" if len(runs) > 1 else "")
    )
    return PlanResult(
        kind="traced",
        config=cfg,
        layout=layout,
        params=w.param_count(),
        ranks=ranks,
        stages=profiles,
        wall_seconds=round(time.perf_counter() - start, 3),
        torch_version=torch.__version__,
        notes=notes,
        replays=replays,
        ring_ranks=places,
    )


def _traced(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, ring_rank: int, say: Progress,
    notes: list[str],
) -> tuple[list[StageProfile], dict[int, Replay], set[int], int]:  # fmt: skip
    """Every stage's profile traced as ``ring_rank`` of its context ring (0 without one), the
    replays, the block counts traced and the stage kinds."""
    from profiling.time_bound import bounded
    from profiling.trace.bounded import Checkpoints, one_trace_at_a_time

    cache: dict[tuple[str, int, int], StageProfile] = {}
    # one_trace_at_a_time leaves torch as it was however the trace ends (a stop of its time
    # bound too): grad mode, the default dtype, modes pushed; the fake world's patches and
    # process group go with the stack
    with one_trace_at_a_time(cfg), contextlib.ExitStack() as stack:
        if bounded():
            stack.enter_context(Checkpoints())
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        # One fake world for every probe, as its rank 0: a stage's memory does not depend on
        # which pipeline rank runs it (its index says whether it is first or last), and
        # DTensor's caches, keyed by the mesh, stay valid for the whole trace.
        stack.enter_context(fake_world())
        stack.enter_context(partitions_shared())  # --compile: a block partitioned once
        stack.callback(_destroy)  # before the group exists: a stop inside mesh_of too
        if layout.cp > 1:  # torch's ring attention for the step (context_parallel's dispatcher)
            from profiling.plans.ring import ring_dispatch, traced_rank

            mesh = mesh_of(layout.mesh, traced_rank(layout.mesh, ring_rank))
            stack.enter_context(ring_dispatch())
        else:
            mesh = mesh_of(layout.mesh, 0)
        profiles = [
            _stage_profile(cfg, w, layout, s, cache, mesh, say, notes) for s in layout.stages
        ]
        replays: dict[int, Replay] = {}
        if counted(cfg) and layout.pp == 1:
            replays[0] = _replay(cfg, w, layout, layout.stages[0], mesh, say)
        elif counted(cfg):  # each pipeline rank's whole step (profiling.plans.pipe_replay)
            replays = _pipeline_replays(cfg, w, layout, mesh, say, notes)
    return profiles, replays, {n for _, n, _ in cache}, len({k for k, _, _ in cache})


# The share of the time left after the probes that the pipeline ranks' whole-step replays may
# take: the replays run every block of every microbatch, twice, on every pipeline rank (Llama
# 3.1 405B over PP 8 with 16 microbatches: minutes of CPU where the probes take 16 s), so on a
# large plan they, not the plan's memory, would use up --timeout and lose the whole result.
REPLAY_SHARE = 0.5


def _pipeline_replays(
    cfg: TrainingConfig, w: WorkloadConfig, layout: Layout, mesh: Any, say: Progress,
    notes: list[str],
) -> dict[int, Replay]:  # fmt: skip
    """Each pipeline rank's replay within ``REPLAY_SHARE`` of the time left, or none: then
    every rank's reserve is the closed form's bound (``plans.report.rank_counters``), said."""
    from profiling.plans.pipe_replay import STEPS, replay_rank
    from profiling.time_bound import TimeBound, TimedOut, remaining

    left = remaining()
    share = None if left is None else max(left * REPLAY_SHARE, 1e-3)
    replays: dict[int, Replay] = {}
    try:
        with TimeBound(share, "the allocator's replay", "give a longer --timeout"):
            for r in range(layout.pp):
                replays[r] = replay_rank(cfg, w, layout, r, mesh, say)
    except TimedOut:
        notes.append(
            f"the caching allocator's replay of every pipeline rank's whole step ({layout.pp} "
            f"ranks × {cfg.microbatches or 1} microbatches × {STEPS} steps) did not finish "
            f"within {share:,.0f} s, {REPLAY_SHARE:.0%} of the time --timeout left after the "
            "probes: each rank's reserve is the closed form's bound (profiling.estimate."
            "reserve); give a longer --timeout for the replay"
        )
        return {}
    return replays


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


__all__ = ["trace_plan"]
