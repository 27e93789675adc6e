"""A measured training run: the reference workloads and user factories of ``trace``, for real.

``measure_step`` builds the model on this machine's device (CUDA if torch sees one, else CPU),
runs ``warmup + steps`` training steps (forward with the loss, backward, optimizer step;
``zero_grad(set_to_none=True)`` between steps) under a
:class:`~profiling.measure.profiler.MemoryProfiler`, and returns the profiler, its summary and
— beside it — the trace of the same configuration with the ratio measured ÷ traced per phase.
On CPU the live-tensor count and the trace see the same tensors, so the ratios must be close
to 1: the measurement is the trace's self-check.

An out-of-memory error is a result (the step, the phase, the memory at that moment). A
factory that raises, returns the wrong thing or runs past ``timeout`` is one sentence naming
it. Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel, Field
from torch import nn

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.measure.profiler import MemoryProfiler, ProfileSummary
from profiling.measure.report import ComparisonRow
from profiling.models.shape_overrides import factory_given, override_note, workload_of
from profiling.models.workloads import WORKLOADS, build_model, describe
from profiling.time_bound import TimeBound, TimedOut
from profiling.trace.build import (
    _DTYPES,
    _apply_checkpointing,
    _block_list,
    _loss_of,
)
from profiling.trace.optimizers import make_optimizer
from profiling.trace.untraceable import untraceable

if TYPE_CHECKING:
    from profiling.trace.step import TraceResult

# progress(steps done, steps in all, what is happening)
Progress = Callable[[int, int, str], None]
PHASES = ("forward", "backward", "optimizer")
# The trace's names for the same phases.
_TRACE_PHASE = {"forward": "forward", "backward": "backward", "optimizer": "optimizer_step"}
_TRACE_END = {
    "forward": "after_forward",
    "backward": "after_backward",
    "optimizer": "after_optimizer_step",
}


class RunOptions(BaseModel):
    """How long and how to measure (the workload itself is the trace's configuration)."""

    steps: int = Field(default=10, ge=1, le=1_000_000, description="timed steps after the warm-up")
    warmup: int = Field(default=2, ge=0, le=1_000_000, description="steps run first, not timed")
    timeout: float | None = Field(default=None, gt=0, description="seconds for the whole run")
    device: str | None = Field(
        default=None, description="cpu, cuda, cuda:N; default: CUDA if present"
    )
    track_tensors: bool = Field(default=True, description="CPU: count live tensor bytes exactly")
    spike_threshold: float = Field(default=0.2, gt=0)
    compare_trace: bool = Field(
        default=True, description="also trace the same step under fake tensors"
    )
    count_flops: bool = Field(default=True, description="count FLOPs in the first warm-up step")


@dataclass
class MeasuredRun:
    config: TrainingConfig  # the configuration measured
    options: RunOptions
    profiler: MemoryProfiler
    summary: ProfileSummary
    model_info: dict[str, Any]
    params: int
    trace: TraceResult | None = None  # of the same configuration, when compared
    comparison: list[ComparisonRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def oom(self) -> bool:
        return self.summary.oom is not None


def _device_of(prof: MemoryProfiler) -> torch.device:
    return torch.device(prof.device)


def _build(
    config: TrainingConfig, device: torch.device, factory: Callable[..., object] | None
) -> tuple:
    assert config.model is not None and config.seq is not None, "measure_step fills both"
    if factory is not None or config.is_factory:
        from profiling.models.factory import call_factory

        shape = factory_given(config)  # --layers … beside it: the factory's own parameters
        model, inputs = call_factory(
            config.model, config.batch, config.seq, factory, fake=False, shape=shape
        )
        model = model.to(device)
        inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
        return model, inputs, {"name": config.model, "factory": True}
    workload = workload_of(config)
    if workload is None:
        raise ProfilingError(
            f"unknown model {config.model!r}; use one of {', '.join(WORKLOADS)}, hf:NAME, "
            "hf:PATH or 'package.module:factory'"
        )
    if config.seq > workload.max_seq:
        raise ProfilingError(
            f"--seq {config.seq} exceeds {workload.name}'s maximum of {workload.max_seq}"
        )
    # The attention kernel and dropout the configuration names, as the trace builds them.
    update = {"attention": "eager" if config.attention == "eager" else "sdpa"}
    model = build_model(workload.model_copy(update={**update, "dropout": config.dropout}), device)
    return model, model.example_inputs(config.batch, config.seq, device=device), describe(workload)


def _with_seq(config: TrainingConfig, factory: Callable[..., object] | None) -> TrainingConfig:
    if config.seq is not None:
        return config
    seq = config.seq_or_default(factory)
    return config.model_copy(update={"seq": seq})


def _optimizer(
    config: TrainingConfig, trainable: list[nn.Parameter], notes: list[str]
) -> torch.optim.Optimizer:
    """The trace's optimizer for the same configuration (mixed: fp32 master weights)."""
    foreach = config.foreach if config.foreach is not None else not config.fsdp
    if config.precision == "mixed" and not config.fsdp:
        from profiling.trace.master_weights import MasterWeightOptimizer

        notes.append(
            "mixed precision: bf16 parameters and gradients, fp32 master weights in the optimizer"
        )
        return MasterWeightOptimizer(
            trainable,
            lambda masters: make_optimizer(config.optimizer, masters, foreach),
            fp32_grads=config.fp32_grads,
        )
    return make_optimizer(config.optimizer, trainable, foreach)


def _who(config: TrainingConfig) -> str:
    return f"model factory {config.model!r}" if config.is_factory else f"model {config.model!r}"


def measure_step(
    config: TrainingConfig,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    factory: Callable[..., object] | None = None,
    wrap: Callable[[torch.nn.Module, MemoryProfiler], torch.nn.Module] | None = None,
) -> MeasuredRun:
    """Measure ``options.warmup + options.steps`` real training steps of ``config``.

    ``config`` is the shared :class:`~profiling.config.TrainingConfig` (model, batch, seq,
    precision, optimizer, checkpointing, foreach, grads_kept, fsdp/zero). ``wrap`` (many
    ranks) wraps the built model, e.g. in DDP or FSDP2.
    """
    options = options or RunOptions()
    if config.model is None:
        raise ProfilingError("a measured run needs --model (a reference name or a factory)")
    problems = untraceable(config)
    if problems:
        raise ProfilingError("a measured run needs " + "; ".join(problems))
    config = _with_seq(config, factory)
    say = progress or (lambda _done, _total, _what: None)
    prof = MemoryProfiler(
        device=options.device,
        warmup=options.warmup,
        spike_threshold=options.spike_threshold,
        track_tensors=options.track_tensors,
    )
    device = _device_of(prof)
    if config.compile and device.type != "cuda":  # measured: tests/profiling/trace/test_compiled
        raise ProfilingError(
            "profile --compile needs a CUDA GPU: the CPU's live-tensor count is a "
            "TorchDispatchMode, under which torch.compile runs each block eagerly (it would "
            "measure the eager step); use trace --compile or estimate --compile here"
        )
    total = options.warmup + options.steps
    notes: list[str] = [n] if (n := override_note(config)) else []  # --layers … beside --model
    who = _who(config)
    try:
        # A bound of the main thread (SIGALRM) or of any other (a stop raised in it): the
        # MemoryProfile tool still runs the CLI in a child it can kill as a whole.
        with TimeBound(options.timeout, who, "give it more time"):
            say(0, total, "building the model")
            previous = torch.get_default_dtype()
            torch.set_default_dtype(_DTYPES[config.param_dtype])
            try:
                model, inputs, info = _build(config, device, factory)
            finally:
                torch.set_default_dtype(previous)
            if config.compile:  # before checkpointing, as in the trace
                from profiling.trace.compiled import compile_for_real

                notes.append(compile_for_real(_block_list(model)))
            if config.checkpointing == "full":
                notes.append(
                    f"activation checkpointing on {_apply_checkpointing(model)} blocks "
                    "(non-reentrant)"
                )
            params = sum(p.numel() for p in model.parameters())
            # Start before wrapping: DDP's gradient buckets (allocated in C++ when it wraps)
            # are then seen being made; tensors made earlier are found by the start's scan.
            prof.start()
            if wrap is not None:
                model = wrap(model, prof)
            trainable = [p for p in model.parameters() if p.requires_grad]
            if not trainable:
                raise ProfilingError(f"{who} has no trainable parameters; nothing to train")
            optimizer = _optimizer(config, trainable, notes)
            assert config.model is not None and config.seq is not None  # checked, filled above
            tokens = config.batch * config.seq if ":" not in config.model else None
            prof.tokens_per_step = tokens
            run = MeasuredRun(
                config=config,
                options=options,
                profiler=prof,
                summary=None,  # type: ignore[arg-type]  # the profiler's, set once the loop ends
                model_info=info,
                params=params,
                notes=notes,
            )
            _loop(run, model, inputs, optimizer, device, total, say, who)
    except BaseException as exc:
        prof.stop()  # leave no tensor-accounting mode behind in the caller's process
        if not isinstance(exc, TimedOut):
            raise
        raise ProfilingError(
            f"{who} did not finish {total} steps within --timeout {options.timeout:g} s; "
            "give it more time, fewer --steps, or a smaller --batch/--seq"
        ) from None
    run.summary = prof.summary()
    run.summary.notes.extend(notes)
    if options.compare_trace and not run.oom:
        say(total, total, "tracing the same step under fake tensors")
        _compare_with_trace(run, factory)
    return run


def _loop(
    run: MeasuredRun,
    model: torch.nn.Module,
    inputs: tuple[object, ...],
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    total: int,
    say: Progress,
    who: str,
) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from profiling.trace._torch_compat import cpu_flash_formulas, safe_flop_formulas

    config, prof = run.config, run.profiler
    failures: dict[str, str] = {}  # FLOP formulas that failed: a note, never a lost step
    formulas = safe_flop_formulas(failures, {**_flop_registry(), **cpu_flash_formulas()})
    autocast = (
        (lambda: torch.autocast(device.type, dtype=_DTYPES[config.compute_dtype]))
        if config.autocast
        else contextlib.nullcontext
    )
    model.train()
    phase = "forward"
    for step in range(total):
        counting = step == 0 and run.options.warmup > 0 and run.options.count_flops
        counter = FlopCounterMode(display=False, custom_mapping=formulas) if counting else None
        try:
            with counter if counter is not None else contextlib.nullcontext():
                phase = "forward"
                with prof.phase("forward"), autocast():
                    loss = _loss_of(model(*inputs))
                phase = "backward"
                with prof.phase("backward"):
                    loss.backward()
                    del loss  # as the trace does: the loss is not held into the next phase
                phase = "optimizer"
                with prof.phase("optimizer"):
                    optimizer.step()
                # Between phases (still in the step's peak), as the trace does: "after
                # optimizer" then holds the gradients in both.
                optimizer.zero_grad(set_to_none=not config.grads_kept)
        except ProfilingError as exc:
            raise ProfilingError(f"{who}: {exc}") from None
        except Exception as exc:
            if prof.oom is not None:  # a result, not a crash
                say(step, total, f"out of memory in step {step}, {phase}")
                return
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ProfilingError(
                f"{who} failed in step {step}, {phase}: {type(exc).__name__}: {text[:300]}; "
                "fix the model or its inputs (it runs for real here)"
            ) from None
        if counter is not None:
            prof.flops_per_step = float(counter.get_total_flops())
            run.notes.append(
                "FLOPs counted by torch's FlopCounterMode in warm-up step 0 (matmuls, attention, "
                "convolutions; forward and backward)"
            )
            run.notes += [
                f"FLOPs of {op} not counted (its formula failed: {why})"
                for op, why in failures.items()
            ]
        prof.record_step(step)
        say(step + 1, total, f"step {step + 1}/{total}")


# The trace beside a measurement: minutes for a big model on a busy machine, never a hang.
TRACE_TIMEOUT_S = 900.0


def _flop_registry() -> dict[Any, Any]:
    from torch.utils.flop_counter import flop_registry

    return flop_registry


def _compare_with_trace(run: MeasuredRun, factory: Callable[..., object] | None) -> None:
    """The trace of the same configuration beside the measurement, ratio per phase."""
    # The trace keeps tensors as the measured device's kernels do. It runs in a process of its
    # own (a factory function from Python: in this one), so that not even a C++ abort in
    # torch can take the measurement with it: a trace that fails is a note.
    target = "cuda" if run.summary.device.get("kind") == "cuda" else "cpu"
    config = run.config.model_copy(update={"target": target})
    try:
        if factory is None:
            from profiling.trace.child import trace_in_child

            trace = trace_in_child(config, TRACE_TIMEOUT_S)
        else:
            from profiling.trace.run import trace_bound
            from profiling.trace.step import trace_step

            with trace_bound(TRACE_TIMEOUT_S, config):
                trace = trace_step(config, factory=factory)
    except Exception as exc:  # the measurement is kept whatever the trace does
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        run.summary.notes.append(f"no trace beside the measurement: {text}")
        return
    run.trace = trace
    run.comparison = compare_rows(run, trace)
    if run.summary.device.get("kind") == "cuda":
        run.summary.notes.append(
            "measured ÷ traced on a GPU: the allocator rounds every block up (512 B; 2 MB "
            "segments), cuBLAS/cuDNN keep workspaces, and kernels differ from the CPU trace "
            "(e.g. fused attention); the CUDA context is in NVML's 'used', not in either number"
        )


def compare_rows(run: MeasuredRun, trace: TraceResult) -> list[ComparisonRow]:
    """Measured beside traced: each phase's peak (and memory at its end) and the step's peak.

    A steady-state trace is compared with the last measured step; a first-step trace (older
    traces) with step 0.
    """
    steady = hasattr(trace, "phase_peaks")
    snaps = run.profiler.snapshots
    steps = [s.step for s in snaps if s.at == "step"]
    if not steps:
        return []
    step = steps[-1] if steady else steps[0]
    mine = {s.phase: s for s in snaps if s.at == "phase" and s.step == step}
    target = getattr(trace.config, "target", "cpu")  # whose kernels the trace kept
    rows: list[ComparisonRow] = []
    for name in PHASES:
        m = mine.get(name)
        if m is None:
            continue
        if steady:
            traced_peak = trace.phase_peaks.get(_TRACE_PHASE[name])
            if traced_peak is not None:
                rows.append(_row(f"{name} peak", m.peak, traced_peak, step, target))
        end = trace.phases.get(_TRACE_END[name], {}).get("total")
        if end is not None:
            rows.append(_row(f"after {name}", m.current, end, step, target))
    step_snap = next(s for s in snaps if s.at == "step" and s.step == step)
    rows.append(_row("step peak", step_snap.peak, trace.peak_bytes, step, target))
    return rows


def _row(what: str, measured: int, traced: int, step: int | None, target: str) -> ComparisonRow:
    return {
        "what": what,
        "measured_bytes": int(measured),
        "traced_bytes": int(traced),
        "ratio": (measured / traced) if traced else None,
        "step": step,
        "target": target,
    }
