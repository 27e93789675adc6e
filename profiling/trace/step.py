"""Traced memory: one training step under fake tensors with PyTorch's memory tracker.

``trace_step`` builds the model inside ``FakeTensorMode`` (tensors carry shapes and dtypes but
no storage), then runs forward, loss, backward and the optimizer step inside
``torch.distributed._tools.mem_tracker.MemTracker``. The tracker sees every storage that is
created and freed, so the per-category peak is exact for the ops that ran — with nothing
allocated and no GPU. FSDP2 sharding is traced under a fake process group at any world size.

Everything here uses private torch APIs; ``_require_tracing_apis`` checks them once and turns
a missing one into a clear :class:`ProfilingError`. Import this module lazily: it imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel, Field
from torch import nn

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.comm import step_comm
from profiling.estimate.counters import Counters
from profiling.estimate.step_time import StepTime, optimizer_overheads, step_time
from profiling.estimate.time import optimizer_shards
from profiling.models.shape_overrides import workload_of
from profiling.models.workloads import describe
from profiling.time_bound import bounded
from profiling.trace.allocations import AllocationLog, counted, replay_of
from profiling.trace.bnb import paged_bytes
from profiling.trace.bounded import Checkpoints, checked_progress, one_trace_at_a_time
from profiling.trace.build import (
    _autocast,
    _block_prefix,
    _build,
    _fake_failure,
    _fake_process_group,
    _fill_dtensor_caches,
    _global_numel,
    _hf_module,
    _loss_of,
    _scaled_layers,
    _traceable,
)
from profiling.trace.ddp import Buckets, is_ddp
from profiling.trace.lowest_block import backward_peak, watch_lowest_block
from profiling.trace.raw import FIRST, PHASES, STEADY, _highest, _named, _Raw
from profiling.trace.target import describe_rules, kernels
from profiling.trace.tracker import (
    FlopCount,
    ModuleMemory,
    flop_count,
    is_fast_tracker,
    make_tracker,
    merge_snapshots,
    module_table,
    phase_snapshot,
    to_categories,
)

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.trace.tracker import StepTracker

Progress = Callable[[str], None]

# A trace is configured by the one model every tool shares (the older name kept for callers).
TraceConfig = TrainingConfig


class TraceResult(BaseModel):
    config: TraceConfig
    model_info: dict[str, Any]
    params: int
    peak_bytes: int  # the steady-state peak: what a long run reaches
    peak_phase: str  # forward | backward | optimizer_step
    by_category: dict[str, int]  # breakdown at the moment of the peak (sums to peak_bytes)
    phase_peaks: dict[str, int]  # the steady step's peak within each phase
    first_step_peak_bytes: int  # step 1: optimizer states are created inside its step
    first_step_peak_phase: str
    after_step: dict[str, int]  # what stays allocated after the step
    phases: dict[str, dict[str, int]]  # by category (+ "total") after forward/backward/step
    by_module: dict[str, ModuleMemory]
    flops: FlopCount
    time: StepTime | None = None  # with config.gpu: the step's time at config.mfu
    counters: Counters | None = None  # --counter reserved|nvml: the allocator replayed
    paged_bytes: int = 0  # a paged optimizer's managed memory: in no peak above (trace.bnb)
    wall_seconds: float
    torch_version: str
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- the traced step


def trace_step(
    config: TraceConfig,
    progress: Progress | None = None,
    upstream_tracker: bool = False,
    factory: Callable[..., object] | None = None,
    module_depth: int = 2,
    block_scaling: bool | None = None,
    observe: Callable[[StepTracker], None] | None = None,
    replay_on_miss: bool = False,
) -> TraceResult:
    """Trace a steady-state training step of ``config.model``: exact bytes by category.

    The loop is a real one, on one model and one optimizer: a first step (forward, loss,
    backward, ``optimizer.step()`` — which creates the optimizer's states), ``zero_grad`` (set
    to None, PyTorch's default, unless ``grads_kept``), then the traced step. Its peak is the
    one every later step repeats; the first step's peak is reported beside it.

    ``factory`` (from Python) is a function returning ``(model, inputs)`` like a
    ``module:function`` factory; it is called under fake tensors and ``config.model`` only
    names it. ``upstream_tracker=True`` uses torch's peak bookkeeping unchanged (several times
    slower); the default replaces only that with a faster one (tests check both agree).

    ``block_scaling`` (default: for reference models of more than 12 blocks) traces the loop
    with 3, 4 and 5 of the model's identical blocks and extrapolates every number exactly
    (``profiling.trace.scaling``); ``False`` traces every block.

    ``observe`` is called with the memory tracker before the loop runs (a memory snapshot's
    recorder, ``profiling.trace.snapshot_export``); it implies tracing every block.
    ``replay_on_miss``: where block scaling misses and every block is traced after all, its
    allocations are replayed too (``counters``), as ``--counter reserved`` would.
    """
    config = _traceable(config)
    say = checked_progress(progress)
    if config.seq is None:
        config = config.model_copy(update={"seq": config.seq_or_default(factory)})
    start = time.perf_counter()
    with one_trace_at_a_time(config), contextlib.ExitStack() as stack:
        if bounded():
            stack.enter_context(Checkpoints())  # the time bound stops it at a torch call
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        mesh = stack.enter_context(_fake_process_group(config.world_size)) if config.fsdp else None
        if mesh is not None:
            # DTensor derives each op's output metadata by running it on fake tensors of the
            # *global* shape, once per op signature (then cached). Under our fake mode the
            # tracker counts those phantom tensors the first time only (a cold-process FSDP
            # first step was 13 % high on a toy model); a real run allocates nothing for them.
            # One untracked step on a throwaway model fills the caches first.
            say("warming DTensor's caches")
            _fill_dtensor_caches(config, mesh, factory)
        blocks = _scaled_layers(config, factory)
        if block_scaling is None:
            block_scaling = blocks is not None and blocks > SCALE_ABOVE_BLOCKS
        # The reserve is not affine in the block count: a later block's requests find the
        # cached blocks its predecessors left (CUDACachingAllocator.cpp's best fit over
        # segments that never merge), which 1-5 blocks do not reach (tests/profiling/trace/
        # test_scaled_reserve.py): a counter past allocated replays every block.
        scaled_counters = block_scaling and counted(config)
        block_scaling = block_scaling and observe is None and not counted(config)
        block_scaling = block_scaling and not config.kd_teacher  # the teacher is built whole
        raw = missed = None
        layered = _hf_module(config, factory)  # transformers' module: 1, 2, 3 layers
        if block_scaling and blocks is not None and blocks > (3 if layered else 5):
            scale = _trace_layer_scaled if layered else _trace_scaled
            raw = scale(config, mesh, say, not upstream_tracker, blocks, module_depth)
            missed = raw is None
        if raw is None:
            raw = _trace_in_fake_mode(
                config,
                mesh,
                say,
                not upstream_tracker,
                factory,
                module_depth=module_depth,
                observe=observe,
                log=AllocationLog() if counted(config) or (missed and replay_on_miss) else None,
            )
        if missed:
            raw.notes.append(
                "block scaling's fit did not hold past its samples: every block traced"
            )
        if scaled_counters and blocks is not None:
            raw.notes.append(
                f"every one of the {blocks} blocks traced: --counter {config.counter} replays "
                "each allocation through the caching allocator, whose reserve is not affine "
                "in the block count"
            )
        result = _finish(config, raw, module_depth)
    result.wall_seconds = round(time.perf_counter() - start, 3)
    return result


def _run_step(
    tracker: StepTracker,
    model: nn.Module,
    inputs: tuple[object, ...],
    optimizer: torch.optim.Optimizer,
    autocast: Callable[[], contextlib.AbstractContextManager[object]],
    say: Progress,
    label: str,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """One training step; the state after each phase and each phase's own peak snapshot."""
    phases: dict[str, dict[str, int]] = {}
    peaks: dict[str, dict[str, int]] = {}
    say(f"{label}: forward")
    tracker.begin_phase(f"{label}/forward")
    with autocast():
        loss = _loss_of(model(*inputs))
    peaks["forward"] = merge_snapshots(tracker.get_tracker_snapshot("peak"))
    phases["after_forward"] = phase_snapshot(tracker)
    say(f"{label}: backward")
    tracker.begin_phase(f"{label}/backward")
    loss.backward()
    del loss
    peaks["backward"] = backward_peak(tracker)  # one peak, split in two where layer-scaled
    phases["after_backward"] = phase_snapshot(tracker)
    say(f"{label}: optimizer step")
    tracker.begin_phase(f"{label}/optimizer_step")
    optimizer.step()
    peaks["optimizer_step"] = merge_snapshots(tracker.get_tracker_snapshot("peak"))
    phases["after_optimizer_step"] = phase_snapshot(tracker)
    return phases, peaks


def _trace_in_fake_mode(
    config: TraceConfig,
    mesh: DeviceMesh | None,
    say: Progress,
    fast: bool,
    factory: Callable[..., object] | None = None,
    layers: int | None = None,
    module_depth: int = 2,
    observe: Callable[[StepTracker], None] | None = None,
    stretches: bool = True,
    log: AllocationLog | None = None,
) -> _Raw:
    from torch._subclasses.fake_tensor import FakeTensorMode

    notes: list[str] = [describe_rules(config.target)]
    # Fake tensors live on the cpu device (a fake cuda device aborts autograd on CPU-only
    # builds); what CUDA's kernels keep differently is ``profiling.trace.target``'s rules.
    with FakeTensorMode(allow_non_fake_inputs=False):
        say("building model")
        model, inputs, info, optimizer = _build(config, mesh, factory, notes, layers)
        # QLoRA's packed 4-bit storage is not its parameter count: the model's own, unpacked.
        params = info.pop("traced_params", None) or sum(
            _global_numel(p) for p in model.parameters()
        )
        tracker = make_tracker(model, optimizer, inputs, mesh, fast)
        buckets = Buckets.of(config, model, tracker) if is_ddp(config) else None
        for watcher in (observe, log.attach if log is not None else None):
            if watcher is not None:
                watcher(tracker)
        if fast and not is_fast_tracker(tracker):
            notes.append(
                f"torch {torch.__version__}: PyTorch's memory tracker used unchanged (the "
                "faster peak bookkeeping is checked only against known torch versions)"
            )
        prefix = _block_prefix(model)
        if layers is not None and stretches:  # the block-scaled trace: each stretch's maximum
            tracker.block_prefix = prefix
        elif layers is not None:  # the layer-scaled trace: a backward's peak in two windows
            watch_lowest_block(tracker, model)
        autocast = functools.partial(_autocast, config)
        peaks = {}
        run = _run_step
        if config.accumulate_unsharded:  # FSDP's micro-batches without gradient sync first
            from profiling.trace.no_sync import accumulating

            run = accumulating(config.accumulate_unsharded, _run_step)
        with kernels(config.target), tracker:
            try:
                _, peaks[FIRST] = run(tracker, model, inputs, optimizer, autocast, say, FIRST)
                # What the loop does between steps. PyTorch's default frees the gradients.
                optimizer.zero_grad(set_to_none=not config.grads_kept)
                tracker.reset_mod_stats()  # MemTracker's way to trace another iteration
                if buckets is not None:  # DDP's _pre_forward of the second step rebuilds them
                    notes.append(buckets.rebuild(listed=layers is None))
                tracker.count_flops = True
                phases, peaks[STEADY] = run(
                    tracker, model, inputs, optimizer, autocast, say, STEADY
                )
                tracker.count_flops = False
            except ProfilingError:
                raise
            except Exception as exc:
                raise ProfilingError(_fake_failure(config.model, exc)) from None
            after = merge_snapshots(tracker.get_tracker_snapshot())
        if config.fsdp_flat:  # FSDP1's flat gradient: the estimate's moment alone
            from profiling.trace.no_sync import FSDP1_NOT_TRACED

            notes.append(FSDP1_NOT_TRACED)
        notes += [
            f"FLOPs of {op} not counted (its formula failed: {why})"
            for op, why in tracker.flop_failures.items()
        ]
        say("summarizing")
        return _Raw(
            info=info,
            params=params,
            root=type(model).__name__,
            block_prefix=prefix,
            peaks=peaks,
            phases=phases,
            after=after,
            modules=module_table(tracker, module_depth),
            flops=tracker.flops,
            segments=tracker.segments,
            notes=notes,
            replay=replay_of(config, log),
            paged=paged_bytes(optimizer),
        )


def _finish(config: TraceConfig, raw: _Raw, module_depth: int) -> TraceResult:
    notes = list(raw.notes)
    notes.append(
        "steady state: the traced step is the second of a loop on the same model and optimizer "
        + (
            "(gradients zeroed in place, so they stay allocated through forward)"
            if config.grads_kept
            else "(zero_grad(set_to_none=True), PyTorch's default: gradients freed between steps)"
        )
    )
    peaks, first_peaks = raw.peaks[STEADY], raw.peaks[FIRST]
    top, first_top = _highest(peaks), _highest(first_peaks)
    flops = flop_count(raw.flops, module_depth)
    timed, gpu = None, config.gpu_spec()
    if gpu is not None:
        lora = raw.info.get("lora") or {}
        trained = lora.get("adapter_params") if config.lora_rank is not None else raw.params
        overheads = optimizer_overheads(config, float(trained or 0), gpu, optimizer_shards(config))
        timed = step_time(
            flops.total, config.batch * config.seq_or_default(), gpu, config.mfu,
            sixteen_bit=config.compute_dtype != "fp32", gpus=config.world_size,
            tokens=config.tokens, overheads=overheads, comm=step_comm(config),
        )  # fmt: skip
    return TraceResult(
        config=config,
        model_info=raw.info,
        params=raw.params,
        peak_bytes=int(peaks[top].get("Total", 0)),
        peak_phase=top,
        by_category=to_categories(peaks[top]),
        phase_peaks={ph: int(peaks[ph].get("Total", 0)) for ph in PHASES},
        first_step_peak_bytes=int(first_peaks[first_top].get("Total", 0)),
        first_step_peak_phase=first_top,
        after_step=to_categories(raw.after),
        phases=raw.phases,
        by_module=raw.modules,
        flops=flops,
        time=timed,
        wall_seconds=0.0,
        torch_version=torch.__version__,
        notes=notes,
        counters=raw.replay.counters(config, raw.paged) if raw.replay is not None else None,
        paged_bytes=raw.paged,
    )


# The full model is traced when it has at most this many blocks (cheaper than 3 + 4 + 5).
SCALE_ABOVE_BLOCKS = 12


def _trace_scaled(
    config: TraceConfig, mesh: DeviceMesh | None, say: Progress, fast: bool, blocks: int, depth: int
) -> _Raw | None:
    """The loop traced at 3, 4 and 5 blocks and extrapolated to ``blocks``; None if a
    prediction misses (see ``profiling.trace.scaling``)."""
    from profiling.trace.scaling import SAMPLE_BLOCKS, NotAffine, extrapolate, phase_peak

    raws = {}
    for n in SAMPLE_BLOCKS:
        raws[n] = _trace_in_fake_mode(
            config,
            mesh,
            lambda stage, n=n: say(f"{n} blocks: {stage}"),
            fast,
            None,
            layers=n,
            module_depth=depth,
        )
    prefix = raws[SAMPLE_BLOCKS[0]].block_prefix
    if prefix is None:
        return None
    samples = {}
    for n, raw in raws.items():
        samples[n] = named = _named(raw, depth)
        if f"module|{raw.root}" in named:  # the root's peaks come from the stretches below
            named[f"module|{raw.root}"].update(peak_forward=0, peak_backward=0)
        # The stretches must account for each phase's peak exactly, in every sample.
        for label, by_phase in raw.peaks.items():
            for ph, snap in by_phase.items():
                got = phase_peak(raw.segments, f"{label}/{ph}", prefix, ph == "backward")
                if to_categories(got) != to_categories(snap) or got["Total"] != snap["Total"]:
                    return None
    try:
        full = extrapolate(samples, blocks, prefix)
    except NotAffine:
        return None
    segments = {k.split("|", 1)[1]: v for k, v in full.items() if k.startswith("segment|")}
    peaks = {
        label: {
            ph: phase_peak(segments, f"{label}/{ph}", prefix, ph == "backward") for ph in PHASES
        }
        for label in (FIRST, STEADY)
    }
    modules = {
        k.split("|", 1)[1]: ModuleMemory(**v) for k, v in full.items() if k.startswith("module|")
    }
    root = raws[SAMPLE_BLOCKS[0]].root
    if root in modules:  # the whole model's peaks: its highest stretches, not an affine sum
        modules[root] = modules[root].model_copy(
            update={
                "peak_forward": peaks[STEADY]["forward"]["Total"],
                "peak_backward": peaks[STEADY]["backward"]["Total"],
            }
        )
    base = raws[SAMPLE_BLOCKS[0]]
    return _Raw(
        info={**base.info, **(describe(w) if (w := workload_of(config)) else {})},
        params=full["params"]["n"],
        paged=full["paged"]["n"],
        root=root,
        block_prefix=prefix,
        peaks=peaks,
        phases={k.split("|", 1)[1]: v for k, v in full.items() if k.startswith("phase|")},
        after=full["after"],
        modules=modules,
        flops={k.split("|", 1)[1]: v for k, v in full.items() if k.startswith("flops|")},
        segments=segments,
        notes=[
            *base.notes,
            f"block-scaled: the loop was traced with 3, 4 and 5 of the {blocks} identical "
            "blocks and every number extrapolated exactly (each is affine in the block count; "
            "the 5-block trace checked every prediction to the byte)",
        ],
    )


def _trace_layer_scaled(
    config: TraceConfig, mesh: DeviceMesh | None, say: Progress, fast: bool, blocks: int, depth: int
) -> _Raw | None:
    """transformers' module traced with 1, 2 and 3 layers (and 4 when one layer is special) and
    extrapolated to ``blocks``; None if a prediction misses or a per-layer row was asked for
    (``profiling.trace.scaling``)."""
    from profiling.trace.scaling import LAYER_SAMPLES, NotAffine, extrapolate_layers, split_block

    raws: dict[int, _Raw] = {}
    full = None
    for counts in LAYER_SAMPLES:
        for n in counts:
            if n not in raws:
                say_n = functools.partial(lambda n, stage: say(f"{n} layers: {stage}"), n)
                raws[n] = _trace_in_fake_mode(
                    config, mesh, say_n, fast, layers=n, module_depth=depth,
                    stretches=False,
                )  # fmt: skip
        base, prefix = raws[1], raws[1].block_prefix
        if prefix is None or base.info.get("traced") != "transformers":
            return None
        if any(split_block(k, prefix)[1] is not None for r in raws.values() for k in r.modules):
            return None  # a module table as deep as the layers: only a full trace has each row
        named = {n: _named(raws[n], depth, True) for n in counts}
        try:
            full = extrapolate_layers(named, blocks, prefix, counts)
            break
        except NotAffine:
            continue
    if full is None:
        return None
    base = raws[counts[0]]

    def part(kind: str) -> dict[str, dict[str, int]]:
        return {k.split("|", 1)[1]: v for k, v in full.items() if k.startswith(kind + "|")}

    peaks = part("peak")
    return _Raw(
        info={**base.info, **(describe(w) if (w := workload_of(config)) else {})},
        params=full["params"]["n"],
        paged=full["paged"]["n"],
        root=base.root,
        block_prefix=prefix,
        peaks={lb: {ph: peaks[f"{lb}|{ph}"] for ph in PHASES} for lb in (FIRST, STEADY)},
        phases=part("phase"),
        after=full["after"],
        modules={k: ModuleMemory(**v) for k, v in part("module").items()},
        flops=part("flops"),
        segments={},
        notes=[
            *base.notes,
            f"layer-scaled: transformers' module was traced with {counts[0]}, {counts[1]} and "
            f"{counts[2]} of its {blocks} identical layers and every number extrapolated exactly "
            f"(each is affine in the layer count; the {counts[2]}-layer trace checked every "
            "prediction to the byte)",
        ],
    )
