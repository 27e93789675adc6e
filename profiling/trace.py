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
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from pydantic import BaseModel, Field
from torch import nn

from profiling._factory import call_factory
from profiling._tracker import (
    ModuleMemory,
    is_fast_tracker,
    make_tracker,
    merge_snapshots,
    module_table,
    phase_snapshot,
    to_categories,
)
from profiling.config import OPTIMIZERS as CONFIG_OPTIMIZERS
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.workloads import WORKLOADS, build_model, describe

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The optimizers torch ships: the ones a trace can run (the one list lives in profiling.config).
OPTIMIZERS = tuple(name for name, spec in CONFIG_OPTIMIZERS.items() if spec.in_torch)
MIN_TORCH = (2, 5)

Progress = Callable[[str], None]
# Tracing touches process-global state (default dtype, the process group, dispatch modes);
# hosts that run tools on threads get one trace at a time.
_TRACE_LOCK = threading.Lock()

# A trace is configured by the one model every tool shares (an alias kept for callers).
TraceConfig = TrainingConfig


def _dtypes(config: TrainingConfig) -> tuple[str, str]:
    """(autocast dtype, parameter dtype) the traced step runs with.

    ``mixed`` is traced as bf16 autocast over fp32 parameters (with FSDP: its
    MixedPrecisionPolicy), as before the precision vocabulary; pure ``bf16`` builds the model in
    bf16 without autocast.
    """
    if config.precision == "bf16":
        return "fp32", "bf16"
    return config.compute_dtype, "fp32"


def _untraceable(config: TrainingConfig) -> list[str]:
    """What of the configuration the trace cannot reproduce (each: what to use instead)."""
    problems = []
    if config.model is None:
        problems.append("a --model (a reference name or package.module:factory), not --params")
    if config.lora_rank is not None:
        problems.append("full training (no --lora-rank)")
    if config.tp > 1:
        problems.append("no tensor parallelism (--tp 1)")
    if config.offload_optimizer:
        problems.append("optimizer state on the GPU (no --offload-optimizer)")
    if config.checkpointing == "selective":
        problems.append("--checkpointing none or full (selective is estimated only)")
    if config.attention == "eager" or config.dropout:
        problems.append("--attention sdpa/flash and no dropout (what the reference models run)")
    if config.optimizer not in OPTIMIZERS:
        problems.append(
            f"an optimizer torch ships ({', '.join(OPTIMIZERS)}); {config.optimizer} needs "
            f"{CONFIG_OPTIMIZERS[config.optimizer].note or 'its own package'}: use 'estimate'"
        )
    return problems


class TraceResult(BaseModel):
    config: TrainingConfig
    model_info: dict[str, Any]
    params: int
    peak_bytes: int
    by_category: dict[str, int]  # breakdown at the moment of the peak (sums to peak_bytes)
    after_step: dict[str, int]  # what stays allocated after the step: the steady state
    phases: dict[str, dict[str, int]]  # by category (+ "total") after forward/backward/step
    by_module: dict[str, ModuleMemory]
    wall_seconds: float
    torch_version: str
    notes: list[str] = Field(default_factory=list)


def _require_tracing_apis() -> None:
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH:
        raise ProfilingError(
            f"tracing needs torch >= {'.'.join(map(str, MIN_TORCH))} "
            f"(found {torch.__version__}); upgrade torch or use 'estimate' instead"
        )
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
        from torch.distributed._tools.mem_tracker import MemTracker  # noqa: F401
    except ImportError as exc:
        raise ProfilingError(
            f"this torch ({torch.__version__}) lacks the private tracing APIs ({exc}); "
            "install a torch with FakeTensorMode and MemTracker, or use 'estimate' instead"
        ) from None


# ---------------------------------------------------------------- models and inputs


def _make_model(
    config: TraceConfig, factory: Callable[..., Any] | None = None
) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any]]:
    if factory is not None or ":" in config.model:
        model, inputs = call_factory(config.model, config.batch, config.seq, factory)
        return model, inputs, {"name": config.model, "factory": True}
    if config.model not in WORKLOADS:
        known = ", ".join(WORKLOADS)
        raise ProfilingError(
            f"unknown model {config.model!r}; use one of {known} or 'package.module:factory'"
        )
    workload = WORKLOADS[config.model]
    if config.seq > workload.max_seq:
        raise ProfilingError(
            f"--seq {config.seq} exceeds {workload.name}'s maximum of {workload.max_seq}"
        )
    model = build_model(workload)
    return model, model.example_inputs(config.batch, config.seq), describe(workload)


def _loss_of(output: Any) -> torch.Tensor:
    if isinstance(output, dict) and "loss" in output:
        output = output["loss"]
    elif isinstance(output, tuple | list) and output:
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise ProfilingError(
            f"the model returned {type(output).__name__}; return a loss or a tensor to reduce"
        )
    # A scalar is the loss; anything else is reduced so backward covers the whole graph.
    return output if output.dim() == 0 else output.float().mean()


def _block_list(model: nn.Module) -> nn.ModuleList | None:
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m)]
    return max(lists, key=lambda m: sum(p.numel() for p in m.parameters()), default=None)


def _apply_checkpointing(model: nn.Module) -> int:
    from torch.utils.checkpoint import checkpoint

    blocks = _block_list(model)
    if blocks is None:
        raise ProfilingError(
            "--checkpointing wraps the model's repeated blocks, but it has no nn.ModuleList"
        )
    for block in blocks:
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)
    return len(blocks)


def make_optimizer(name: str, params: Any, foreach: bool = True) -> torch.optim.Optimizer:
    opts = {"foreach": foreach}
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, **opts)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, **opts)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9, **opts)
    if name == "sgd-nomomentum":
        return torch.optim.SGD(params, lr=1e-2, **opts)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=1e-2, **opts)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=1e-3, **opts)
    raise ProfilingError(
        f"optimizer {name!r} cannot be traced; use one of {', '.join(OPTIMIZERS)} "
        "(8-bit Adam and friends need bitsandbytes and a GPU: use 'estimate')"
    )


# ---------------------------------------------------------------- the traced step


@contextlib.contextmanager
def _fake_process_group(world_size: int):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except ImportError as exc:
        raise ProfilingError(
            f"this torch lacks the fake process group ({exc}); FSDP tracing is unavailable"
        ) from None
    if dist.is_initialized():
        raise ProfilingError(
            "a torch.distributed process group is already initialized; trace FSDP in a "
            "fresh process"
        )
    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        # The mesh must exist before FakeTensorMode is entered (it allocates real tensors).
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


def trace_step(
    config: TraceConfig,
    progress: Progress | None = None,
    upstream_tracker: bool = False,
    factory: Callable[..., Any] | None = None,
    module_depth: int = 2,
) -> TraceResult:
    """Trace one training step of ``config.model`` and return exact bytes by category.

    ``factory`` (from Python) is a function returning ``(model, inputs)`` like a
    ``module:function`` factory; it is called under fake tensors and ``config.model`` only
    names it. ``upstream_tracker=True`` uses torch's trackers unchanged (several times slower); the
    default adds only a faster peak bookkeeping with the same results (tests check both).
    """
    _require_tracing_apis()
    if config.optimizer not in OPTIMIZERS:
        make_optimizer(config.optimizer, [])  # raises the clear error
    problems = _untraceable(config)
    if problems:
        raise ProfilingError("the trace needs " + "; ".join(problems))
    if config.world_size > 1 and not (config.fsdp or config.sharded):
        raise ProfilingError(
            "--world-size > 1 needs --fsdp (or --gpus N with --zero 2/3; plain data "
            "parallelism replicates everything: the per-rank result equals world size 1)"
        )
    if config.gpus > 1 and not config.fsdp:
        config = config.model_copy(update={"fsdp": True})  # ZeRO over N GPUs: FSDP2 shards it
    say = progress or (lambda _stage: None)
    if config.seq is None:
        config = config.model_copy(update={"seq": config.seq_or_default()})
    start = time.perf_counter()
    with _TRACE_LOCK, contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        mesh = stack.enter_context(_fake_process_group(config.world_size)) if config.fsdp else None
        if mesh is not None:
            # DTensor derives each op's output metadata by running it on fake tensors of the
            # *global* shape, once per op signature (then cached). The tracker would count those
            # phantom tensors in the first step only (a cold-process FSDP peak was 13–24 %
            # high on a toy model); a real run allocates nothing for them. One discarded step
            # fills the caches, so the traced step is the steady state in every process.
            say("warm-up step (fills DTensor's caches)")
            _trace_in_fake_mode(
                config, mesh, lambda _stage: None, not upstream_tracker, factory, module_depth
            )
        result = _trace_in_fake_mode(config, mesh, say, not upstream_tracker, factory, module_depth)
    result.wall_seconds = round(time.perf_counter() - start, 3)
    return result


def _trace_in_fake_mode(
    config: TraceConfig,
    mesh: Any,
    say: Progress,
    fast: bool,
    factory: Callable[..., Any] | None = None,
    module_depth: int = 2,
) -> TraceResult:
    from torch._subclasses.fake_tensor import FakeTensorMode

    notes: list[str] = []
    dtype, param_dtype = _dtypes(config)
    # Fake tensors live on the cpu device: a fake cuda device fails on CPU-only builds, and
    # byte counts do not depend on the device (attention kernels and allocator rounding do).
    with FakeTensorMode(allow_non_fake_inputs=False):
        say("building model")
        # Pure 16-bit training: build in that dtype (``module.to`` cannot swap tied fake
        # parameters), so factories' floating inputs follow too.
        previous = torch.get_default_dtype()
        torch.set_default_dtype(_DTYPES[param_dtype])
        try:
            model, inputs, info = _make_model(config, factory)
        finally:
            torch.set_default_dtype(previous)
        if config.precision == "mixed" and mesh is None:
            notes.append(
                "precision mixed traced as bf16 autocast over fp32 parameters (fp32 weights and "
                "gradients; the optimizer holds only the moments)"
            )
        if config.checkpointing == "full":
            n = _apply_checkpointing(model)
            notes.append(f"activation checkpointing on {n} blocks (non-reentrant)")
        if mesh is not None:
            mp = _DTYPES[dtype] if dtype != "fp32" else None
            _shard(model, mesh, config.reshard_after_forward, mp)
            notes.append(f"FSDP2 fully_shard per block and root over {config.world_size} ranks")
            if mp is not None:
                notes.append(
                    f"FSDP2 mixed precision: parameters gathered in {dtype}, fp32 sharded "
                    "master weights and gradients (MixedPrecisionPolicy instead of autocast)"
                )
        params = sum(p.numel() for p in model.parameters())
        if mesh is not None:
            params = sum(_global_numel(p) for p in model.parameters())
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not trainable:
            raise ProfilingError("the model has no trainable parameters; nothing to train")
        foreach = config.foreach if config.foreach is not None else mesh is None
        if mesh is not None and foreach:
            notes.append(
                "foreach optimizer under FSDP: DTensor foreach temporaries are counted several "
                "times over by the tracker; prefer the default (for-loop) for FSDP peaks"
            )
        optimizer = make_optimizer(config.optimizer, trainable, foreach)
        notes.append(f"optimizer {config.optimizer} ({'foreach' if foreach else 'for-loop'})")
        tracker = make_tracker(model, optimizer, inputs, mesh, fast)
        if fast and not is_fast_tracker(tracker):
            notes.append(
                f"torch {torch.__version__}: PyTorch's memory tracker used unchanged (the "
                "faster peak bookkeeping is checked only against known torch versions)"
            )
        phases: dict[str, int] = {}
        with tracker:
            try:
                say("forward")
                ctx = (
                    torch.autocast("cpu", dtype=_DTYPES[dtype])
                    if dtype != "fp32" and mesh is None
                    else contextlib.nullcontext()
                )
                with ctx:
                    loss = _loss_of(model(*inputs))
                phases["after_forward"] = phase_snapshot(tracker)
                say("backward")
                loss.backward()
                del loss
                phases["after_backward"] = phase_snapshot(tracker)
                say("optimizer step")
                optimizer.step()
            except ProfilingError:
                raise
            except Exception as exc:
                raise ProfilingError(_fake_failure(config.model, exc)) from None
            after = merge_snapshots(tracker.get_tracker_snapshot())
            phases["after_optimizer_step"] = phase_snapshot(tracker)
        say("summarizing")
        peak_snap = merge_snapshots(tracker.get_tracker_snapshot("peak"))
        by_module = module_table(tracker, module_depth)
    return TraceResult(
        config=config,
        model_info=info,
        params=params,
        peak_bytes=int(peak_snap.get("Total", 0)),
        by_category=to_categories(peak_snap),
        after_step=to_categories(after),
        phases=phases,
        by_module=by_module,
        wall_seconds=0.0,
        torch_version=torch.__version__,
        notes=notes,
    )


def _fake_failure(model: str, exc: Exception) -> str:
    kind = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    hint = (
        "it reads tensor data in Python (.item(), .tolist(), .numpy(), bool(tensor), "
        "data-dependent shapes), which fake tensors cannot provide"
        if any(k in kind for k in ("DataDependent", "DynamicOutputShape"))
        or "data-dependent" in text
        or "numpy" in text.lower()
        else "a fake tensor has shapes and dtypes but no values"
    )
    return (
        f"model {model!r} cannot run under fake tensors ({kind}: {text[:300]}); {hint}. "
        "Make the forward depend only on shapes, or measure it on real hardware instead"
    )


def _global_numel(p: torch.Tensor) -> int:
    full = getattr(p, "full_tensor", None)
    shape = getattr(p, "shape", None)
    if full is not None and shape is not None:  # a DTensor reports its global shape
        n = 1
        for d in shape:
            n *= int(d)
        return n
    return p.numel()


def _shard(model: nn.Module, mesh: Any, reshard_after_forward: bool, mp: Any) -> None:
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
    kwargs: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    if mp is not None:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=mp, reduce_dtype=torch.float32)
    for block in _block_list(model) or []:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
