"""The step the trace runs: the model, its inputs, the optimizer, checkpointing, FSDP sharding.

Everything a traced (or measured) training step is made of before it runs: the reference model
or a user's factory built in the parameter dtype, activation checkpointing on its repeated
blocks, FSDP2 ``fully_shard`` under a fake process group, the optimizer (fp32 master weights for
``mixed``) and autocast. Imports torch.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from profiling._config_behaviours import loss_chunks
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.models.factory import call_factory
from profiling.models.shape_overrides import (
    OVERRIDES,
    factory_given,
    override_note,
    workload_of,
)
from profiling.models.workloads import as_run, build_model, describe
from profiling.trace._torch_compat import missing_memtracker_internals
from profiling.trace.optimizers import OPTIMIZERS, make_optimizer
from profiling.trace.untraceable import untraceable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from torch.distributed.device_mesh import DeviceMesh

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TraceConfig = TrainingConfig
MIN_TORCH = (2, 5)


# ---------------------------------------------------------------- models and inputs


def traced_model(config: TraceConfig) -> str:
    """``config.model`` of a configuration the trace accepted (``untraceable`` needs one)."""
    assert config.model is not None, "trace_step checks untraceable(config) first"
    return config.model


def _teacher_config(config: TraceConfig) -> TraceConfig:
    """The KD teacher as a model of its own: no adapters, no checkpointing (no_grad)."""
    update = {"model": config.kd_teacher, "kd_teacher": None, "lora_rank": None, "qlora": False,
              "tied_head": None, "dropout": 0.0, **dict.fromkeys(OVERRIDES)}  # fmt: skip
    return config.model_copy(update=update)


def _make_model(
    config: TraceConfig, factory: Callable[..., object] | None = None, layers: int | None = None
) -> tuple[nn.Module, tuple[object, ...], dict[str, Any]]:
    name, seq = traced_model(config), config.seq
    assert seq is not None, "trace_step fills seq (seq_or_default) before building"
    if factory is not None or config.is_factory:
        shape = factory_given(config)  # --layers … beside it: the factory's own parameters
        model, inputs = call_factory(name, config.batch, seq, factory, shape=shape)
        return model, inputs, {"name": name, "factory": True}
    workload = as_run(
        workload_of(config),
        config.tied_head,
        config.loss,
        config.litgpt_norm,
        config.litgpt_uncapped,
    )
    if workload is None:
        raise ProfilingError(
            f"unknown model {name!r}; use a reference model, hf:NAME or hf:PATH, or "
            "'package.module:factory'"
        )
    if seq > workload.max_seq:
        raise ProfilingError(f"--seq {seq} exceeds {workload.name}'s maximum of {workload.max_seq}")
    update: dict[str, object] = {
        "attention": "eager" if config.attention == "eager" else "sdpa",  # flash is sdpa here
        "dropout": config.dropout,
        "compile_loss": config.compile,  # torchtune's compile_loss
        "loss": config.loss,
        "loss_chunks": loss_chunks(config),
        "target": config.target,
    }
    if layers is not None:  # the block-scaled trace: the same model with fewer blocks
        update["layers"] = layers
    shape = workload.model_copy(update=update)
    if config.is_hf:
        from profiling.models.hf_module import build_hf

        model, how = build_hf(shape, config)
        return model, model.example_inputs(config.batch, seq), {**describe(workload), **how}
    model = build_model(shape)
    return model, model.example_inputs(config.batch, seq), describe(workload)


def _scaled_layers(config: TraceConfig, factory: Callable[..., object] | None) -> int | None:
    """The reference model's block count when the block-scaled trace applies, else None."""
    workload = None if factory is not None or config.is_factory else workload_of(config)
    return workload.layers if workload is not None and workload.arch != "t5" else None  # T5 whole


def _hf_module(config: TraceConfig, factory: Callable[..., object] | None) -> bool:
    from profiling.models.implementation import TRANSFORMERS, implementation

    w = None if factory is not None or config.is_factory else workload_of(config)
    w = as_run(
        w, config.tied_head, config.loss, config.litgpt_norm, config.litgpt_uncapped
    )  # LitGPT's Phi: our blocks
    return w is not None and implementation(w) == TRANSFORMERS


def _loss_of(output: object) -> torch.Tensor:
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


def _repeated_blocks(model: nn.Module) -> list[nn.Module] | None:
    """Every repeated block: an encoder-decoder's two stacks', else the largest list's."""
    lists: Callable[[], list[nn.ModuleList]] | None = getattr(model, "block_lists", None)
    blocks = [b for bs in lists() for b in bs] if lists is not None else _block_list(model)
    return list(blocks) if blocks is not None else None


def _apply_checkpointing(model: nn.Module, target: str | None = None) -> int:
    """Checkpoint each repeated block (non-reentrant). ``target`` (a trace): the recomputation
    in backward runs under that device's kernel rules too (autograd does not carry torch
    function modes into backward)."""
    from profiling.trace.block_checkpoint import checkpointed_forward

    blocks = _repeated_blocks(model)
    if blocks is None:
        raise ProfilingError(
            "--checkpointing wraps the model's repeated blocks, but it has no nn.ModuleList"
        )
    extra: dict[str, Callable[[], tuple[contextlib.AbstractContextManager[object], ...]]] = {}
    if target is not None:
        from profiling.trace.target import kernels

        extra["context_fn"] = lambda: (contextlib.nullcontext(), kernels(target))
    for block in blocks:
        block.forward = checkpointed_forward(block, **extra)  # no cycle: block_checkpoint
    return len(blocks)


def _checkpoint(model: nn.Module, config: TraceConfig, in_model: Callable[[int], int]) -> list[str]:
    """``--checkpointing full`` (each block) or ``selective`` (each block's attention core:
    Korthikanti et al.'s, ``profiling.trace.selective``); the note saying so."""
    if config.checkpointing == "full":
        n = _apply_checkpointing(model, config.target)
        return [f"activation checkpointing on {in_model(n)} blocks (non-reentrant)"]
    if config.checkpointing == "selective":
        from profiling.trace.selective import apply_selective

        n = apply_selective(_repeated_blocks(model) or [], config.target)
        return [f"selective checkpointing: the attention core of {in_model(n)} blocks "
                "recomputed (non-reentrant)"]  # fmt: skip
    return []


@contextlib.contextmanager
def _fake_process_group(world_size: int) -> Iterator[DeviceMesh]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except ImportError as exc:
        raise ProfilingError(
            f"this torch lacks the fake process group ({exc}); FSDP tracing is unavailable"
        ) from None
    if dist.is_initialized() and dist.get_backend() == "fake":
        # Ours, left by a trace stopped by its time bound where it could not clean up.
        dist.destroy_process_group()
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


def _in_model(
    config: TraceConfig, factory: Callable[..., object] | None, layers: int | None
) -> Callable[[int], int]:
    """A count of the built blocks as the whole model's: a block- or layer-scaled trace builds
    ``layers`` of the model's blocks, and its notes must describe the model, not the sample."""
    workload = None if factory is not None or config.is_factory else workload_of(config)
    if layers is None or workload is None or workload.layers == layers:
        return int
    full = workload.layers
    return lambda n: n * full // layers


def _build(
    config: TraceConfig,
    mesh: DeviceMesh | None,
    factory: Callable[..., object] | None,
    notes: list[str],
    layers: int | None = None,
) -> tuple[nn.Module, tuple[object, ...], dict[str, Any], torch.optim.Optimizer]:
    """Model (built in the parameter dtype, checkpointed, sharded), inputs, info, optimizer."""
    # 16-bit parameters: build in that dtype (``module.to`` cannot swap tied fake
    # parameters), so factories' floating inputs follow too.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(_DTYPES[config.param_dtype])
    try:
        model, inputs, info = _make_model(config, factory, layers)
        # full_dpo_distributed.py's frozen reference, built as the policy is
        reference = (
            _make_model(config, factory, layers)[0] if config.dpo and not config.lora_rank else None
        )
        # knowledge_distillation_*.py's _setup_teacher_model: in the student's dtype, every block
        teacher = _make_model(_teacher_config(config), None)[0] if config.kd_teacher else None
    finally:
        torch.set_default_dtype(previous)
    in_model = _in_model(config, factory, layers)
    notes += [n] if (n := override_note(config)) else []  # --layers … beside --model
    if config.lora_rank is not None:
        from profiling.trace.lora import apply_lora

        added, lora_notes = apply_lora(model, config, in_model)
        info = {**info, **added}
        notes += lora_notes
    if config.compile:  # before checkpointing: checkpoint(compiled block), as torchtune does
        from profiling.trace.compiled import compile_model

        notes.append(compile_model(model, inputs, config, _block_list(model), _autocast,
                                   mesh is None))  # fmt: skip
    notes += _checkpoint(model, config, in_model)
    if config.dpo:
        from profiling.trace.preference import dpo_step

        model = dpo_step(model, reference)
        notes.append(
            "torchtune's DPO step: "
            + (
                "the policy with its adapters off as the reference"
                if reference is None
                else "a frozen copy of the model as the reference"
            )
        )
    if teacher is not None:
        from profiling.trace.distill import kd_step

        model = kd_step(model, teacher)
        notes.append(f"torchtune's knowledge distillation step: the teacher {config.kd_teacher} "
                     "frozen beside the student, its chunked logits under no_grad")  # fmt: skip
    if mesh is not None:
        mp = torch.bfloat16 if config.precision == "mixed" else None
        if config.qlora and not config.torchao_nf4:  # only the packed storage is sharded
            from profiling.trace.nf4 import stats_as_buffers

            stats_as_buffers(model)
        _shard(model, mesh, config.reshard_after_forward, mp)
        notes.append(f"FSDP2 fully_shard per block and root over {config.world_size} ranks")
        from profiling.trace.compiled import prime_partitions

        prime_partitions(model, inputs, config, _autocast)  # compiled blocks, as FSDP2 gathers
        if mp is not None:
            notes.append(
                "mixed precision by FSDP2's MixedPrecisionPolicy(param_dtype=bf16, "
                "reduce_dtype=fp32): fp32 sharded parameters are the master weights (counted "
                "as parameters), bf16 gathered copies, fp32 sharded gradients"
            )
            if config.fp32_grads:
                notes.append("--fp32-grads: FSDP2 already reduces gradients into fp32 shards")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ProfilingError("the model has no trainable parameters; nothing to train")
    foreach = config.foreach if config.foreach is not None else mesh is None
    if mesh is not None and foreach:
        notes.append(
            "foreach optimizer under FSDP: DTensor foreach temporaries are counted several "
            "times over by the tracker; prefer the default (for-loop) for FSDP peaks"
        )
    paged, torchao = config.paged_optimizer, config.torchao_optim
    make = functools.partial(make_optimizer, paged=paged, torchao=torchao)
    if config.optimizer_in_bwd:
        from profiling.trace.in_backward import InBackwardOptimizer

        optimizer: torch.optim.Optimizer = InBackwardOptimizer(
            trainable, lambda one: make(config.optimizer, one, foreach=False)
        )
        optimizer.install(model)
        notes.append(
            "optimizer in backward: one optimizer per parameter, stepped by a hook as its "
            "gradient is ready, the gradient then freed (torchtune's optimizer_in_bwd)"
        )
    elif config.precision == "mixed" and mesh is None and config.lora_rank is None:
        from profiling.trace.master_weights import MasterWeightOptimizer

        optimizer = MasterWeightOptimizer(
            trainable,
            lambda masters: make(config.optimizer, masters, foreach),
            fp32_grads=config.fp32_grads,
        )
        notes.append(
            "mixed precision: bf16 parameters and gradients; the optimizer keeps fp32 master "
            "weights (counted as optimizer state) and steps them"
            + (
                ", with an fp32 gradient copy kept across steps (counted as gradients)"
                if config.fp32_grads
                else ", converting one gradient to fp32 at a time (a temporary)"
            )
        )
    else:
        optimizer = make(config.optimizer, trainable, foreach)
    loop = foreach and not config.optimizer_in_bwd
    if config.optimizer == "adam8bit" or config.paged_optimizer:
        from profiling.trace.bnb import eight_bit_note

        notes.append(eight_bit_note(config.optimizer, config.paged_optimizer, config.torchao_optim))
    else:
        notes.append(f"optimizer {config.optimizer} ({'foreach' if loop else 'for-loop'})")
    if config.precision == "amp-fp16":
        notes.append("amp-fp16: GradScaler's few bytes (a scale and an inf flag) are not traced")
    return model, inputs, info, optimizer


def _autocast(config: TraceConfig) -> contextlib.AbstractContextManager[object]:
    from profiling._config_lora import peft_autocast  # bf16 weights, peft's fp32 adapters

    if config.autocast or peft_autocast(config):
        return torch.autocast("cpu", dtype=_DTYPES[config.dtype])
    return contextlib.nullcontext()


def _block_prefix(model: nn.Module) -> str | None:
    blocks = _block_list(model)
    if blocks is None:
        return None
    name = next(n for n, m in model.named_modules() if m is blocks)
    return f"{type(model).__name__}.{name}."


def _fake_failure(model: str | None, exc: Exception) -> str:
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


def _shard(
    model: nn.Module, mesh: DeviceMesh, reshard_after_forward: bool, mp: torch.dtype | None
) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # torch >= 2.6

    from profiling.trace.bounded import refuse_unshardable
    from profiling.trace.fake_world import lazy_shards

    # No ``mp``: fully_shard's own default policy (no casts).
    policy = (
        MixedPrecisionPolicy(param_dtype=mp, reduce_dtype=torch.float32)
        if mp is not None
        else MixedPrecisionPolicy()
    )
    with lazy_shards() as lazy:
        if not lazy:  # this torch's FSDP2 makes every rank's shard: its cost grows with them
            refuse_unshardable(model, mesh.size())
        # T5's encoder blocks too, as FSDP's auto-wrap does (T5PreTrainedModel._no_split_modules)
        for block in [*(_repeated_blocks(model) or []), model]:
            fully_shard(
                block, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy
            )


def _require_tracing_apis() -> None:
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH:
        raise ProfilingError(
            f"tracing needs torch >= {'.'.join(map(str, MIN_TORCH))} "
            f"(found {torch.__version__}); upgrade torch or use 'estimate' instead"
        )
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError as exc:
        raise ProfilingError(
            f"this torch ({torch.__version__}) lacks the private tracing APIs ({exc}); "
            "install a torch with FakeTensorMode and MemTracker, or use 'estimate' instead"
        ) from None
    missing = missing_memtracker_internals(MemTracker)
    if missing:
        raise ProfilingError(
            f"this torch ({torch.__version__}) has a MemTracker without {', '.join(missing)}, "
            "which the trace extends; use torch 2.11-2.15, or 'estimate' instead"
        )


def _traceable(config: TraceConfig) -> TraceConfig:
    """The configuration as the trace runs it, or a ProfilingError saying what cannot be."""
    _require_tracing_apis()
    if config.optimizer not in OPTIMIZERS:
        make_optimizer(config.optimizer, [])  # raises the clear error
    problems = untraceable(config)
    if problems:
        raise ProfilingError("the trace needs " + "; ".join(problems))
    if config.sharded and not config.fsdp:
        config = config.model_copy(update={"fsdp": True})  # ZeRO over N GPUs: FSDP2 shards it
    if config.fp32_grads and config.precision != "mixed":
        raise ProfilingError(
            "--fp32-grads is the fp32 gradient copy of --precision mixed; add --precision mixed "
            "or drop --fp32-grads"
        )
    return config


def _fill_dtensor_caches(
    config: TraceConfig, mesh: DeviceMesh | None, factory: Callable[..., object] | None
) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiling.trace.target import kernels

    with FakeTensorMode(allow_non_fake_inputs=False), kernels(config.target):
        model, inputs, _, optimizer = _build(config, mesh, factory, [])
        try:
            with _autocast(config):
                loss = _loss_of(model(*inputs))
            loss.backward()
            optimizer.step()
        except ProfilingError:
            raise
        except Exception as exc:
            raise ProfilingError(_fake_failure(config.model, exc)) from None
