"""torch.compile as a trace sees it: each block split by AOTAutograd's own partitioner.

``torch.compile`` hands a block's forward to AOTAutograd, which traces forward and backward
into one joint graph and partitions it with Inductor's partitioner
(``torch._inductor.compile_fx.partition_fn``: Inductor's joint-graph passes, then
``min_cut_rematerialization_partition``). The partitioner, not the eager autograd graph,
decides what the forward keeps for backward: a chain of pointwise ops (RMSNorm's upcast and
rsqrt, SwiGLU's SiLU and product) is recomputed in backward from the few tensors it saves.

Here that partitioner runs on fake tensors, with a compiler that generates no code: the
forward and backward graphs it returns are kept, and each block's forward runs its forward
graph op by op (an ``autograd.Function`` whose backward runs the backward graph). So the
tracker sees exactly the tensors the partitioner saves, alive from forward to backward, and
each block's backward holding what the backward graph computes. What is not modelled: the
transients *inside* a graph — Inductor fuses pointwise ops into kernels that never hold their
intermediates, while this runs the graph's ops one at a time (an upper bound between ops).

``compile_model`` wraps a model's repeated blocks (as torchtune and torchtitan compile them
block by block); ``saved_by`` counts what one block keeps (``compiled_estimate`` gives the
estimate that count). Imports torch.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from profiling.errors import ProfilingError


@dataclass
class Partition:
    """One block's graphs as the partitioner split them, for one signature of its inputs."""

    forward: Any  # fx.GraphModule: (*primals) -> (*outputs, *saved)
    backward: Any  # fx.GraphModule: (*saved, *tangents) -> a gradient (or None) per primal
    outputs: int  # the forward's user outputs (the rest it returns is saved for backward)
    out_spec: Any  # the block's output structure (torch.utils._pytree)
    out_tensor: list[bool]  # which leaves of that structure are tensors
    saved_nodes: list[Any]  # the forward graph's nodes returned as saved, in order
    spans: list[int]  # each primal's places among the graphs' flattened ones
    wraps: list[Any]  # per primal: None, or how its flattened gradient is wrapped again
    # each primal's gradient's places among the backward graph's outputs: the gradient's own
    # structure, not the primal's (a Float8 weight in a DTensor flattens to three, its
    # gradient, a plain DTensor, to two)
    grad_spans: list[int]


class _Graphs(torch.autograd.Function):
    """Runs a partition: its forward graph now, its backward graph in backward. A tensor
    subclass among the primals (tensor parallelism's DTensor parameters) enters the graphs as
    AOTAutograd flattened it (its local shard, its mesh) and its gradient leaves them wrapped
    again, placed as the traced backward placed it."""

    @staticmethod
    def forward(ctx: Any, part: Partition, *primals: torch.Tensor) -> Any:
        with _plain():
            result = part.forward.forward(*flatten(primals))  # the code, not a module's hooks
        outs, saved = result[: part.outputs], result[part.outputs :]
        ctx.part = part
        # a saved mesh is no tensor: kept beside the saved tensors
        ctx.others = {i: s for i, s in enumerate(saved) if not isinstance(s, torch.Tensor)}
        ctx.save_for_backward(*(s for s in saved if isinstance(s, torch.Tensor)))
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
        part: Partition = ctx.part
        unpacked = ctx.saved_tensors  # once: a checkpoint's unpack hook allows no second time
        tensors = iter(unpacked)
        count = len(ctx.others) + len(unpacked)
        saved = [ctx.others[i] if i in ctx.others else next(tensors) for i in range(count)]
        # a fresh zero, not zeros_like: the graphs' values may be an earlier fake mode's (a
        # partition is shared by the probes of one plan's trace)
        tangents = [
            g if g is not None else torch.zeros(o.shape, dtype=o.dtype, device=o.device)
            for g, o in zip(grads, _tangent_likes(part), strict=False)
        ]
        with _plain():
            result = part.backward.forward(*saved, *tangents)
        out: list[Any] = []
        at = 0
        for span, wrap in zip(part.grad_spans, part.wraps, strict=True):
            grad = result[at]
            out.append(wrap(grad) if wrap is not None and grad is not None else grad)
            at += span
        return (None, *out)


def flatten(tensors: Any) -> list[Any]:
    """Tensors as AOTAutograd's graphs take them: a traceable subclass as its inner
    attributes (a DTensor: its local tensor and its DeviceMesh), recursively."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    out: list[Any] = []
    for t in tensors:
        if isinstance(t, torch.Tensor) and is_traceable_wrapper_subclass(t):
            attrs, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]  # the protocol
            out.extend(flatten([getattr(t, a) for a in attrs]))
        else:
            out.append(t)
    return out


def _rewrap(like: torch.Tensor, grad: torch.Tensor | None) -> Callable[[Any], Any] | None:
    """How a gradient of the flattened ``like`` becomes ``like``'s kind again: a DTensor on its
    mesh with the placements the traced backward gave it (a replicated norm weight's under
    sequence parallelism is Partial, as in eager)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(like, DTensor):
        return None
    placements = grad.placements if isinstance(grad, DTensor) else like.placements
    mesh, shape, stride = like.device_mesh, like.shape, like.stride()

    def wrap(local: torch.Tensor) -> Any:
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape,
                                  stride=stride)  # fmt: skip

    return wrap


def _tangent_likes(part: Partition) -> list[Any]:
    out = next(n for n in reversed(part.forward.graph.nodes) if n.op == "output")
    return [node.meta["val"] for node in out.args[0][: part.outputs]]


@contextlib.contextmanager
def _plain() -> Iterator[None]:
    """The graphs hold every cast autocast made when they were traced, and Inductor's kernels
    replace the trace's per-op CUDA rules: run them with neither."""
    from torch._C import _len_torch_function_stack
    from torch.overrides import _pop_mode_temporarily

    with contextlib.ExitStack() as stack:
        for _ in range(_len_torch_function_stack()):
            stack.enter_context(_pop_mode_temporarily())
        stack.enter_context(torch.autocast("cpu", enabled=False))
        yield


class _CudaAutocast(TorchFunctionMode):
    """While a block is partitioned for ``--target cuda``: CUDA's autocast lists (the casts
    are part of the graph), without the trace's fake-kernel rules (Inductor makes its own)."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        from profiling.trace import cuda_autocast
        from profiling.trace.target import _autocast_dtype

        kwargs = kwargs or {}
        if _autocast_dtype() is not None:
            how = cuda_autocast.policy(func, args, kwargs)
            if how:
                return cuda_autocast.run(func, args, kwargs, how)
        return func(*args, **kwargs)


def _boxed(gm: Any, example_inputs: Any) -> Any:
    """The compiler AOTAutograd is given: no code generated, the graph itself run."""
    from torch._functorch._aot_autograd.utils import make_boxed_func

    return make_boxed_func(gm)


def partition(
    fn: Callable[..., Any], primals: list[torch.Tensor], target: str = "cpu",
    plain: Callable[..., Any] | None = None,
) -> tuple[Any, Any, int, list[Any], list[int]]:  # fmt: skip
    """(forward graph, backward graph, user outputs, each primal's gradient wrapper, each
    primal's gradient's count of backward outputs) of ``fn(*primals)`` as Inductor's
    partitioner splits it — under the fake mode the primals carry. With a subclass among the
    primals, one backward through AOTAutograd's own runtime says how each gradient is placed
    and flattened."""
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.compile_fx import partition_fn

    got: dict[str, Any] = {}

    def split(joint: Any, joint_inputs: Any, **kwargs: Any) -> Any:
        # A checkpoint inside the compiled function (torchtitan compiles the checkpointed
        # block) tags its nodes "recompute" as its policy says; Dynamo numbers each region
        # (ac_graph_id), which the partitioner compares: one region per block here.
        for node in joint.graph.nodes:
            if "recompute" in node.meta and node.meta.get("ac_graph_id") is None:
                node.meta["ac_graph_id"] = 1
        fw, bw = partition_fn(joint, joint_inputs, **kwargs)
        for graph in (fw, bw):
            _plain_rng(graph)
        got.update(fw=fw, bw=bw, n=kwargs["num_fwd_outputs"])
        return fw, bw

    mode = _CudaAutocast() if target == "cuda" else contextlib.nullcontext()
    compiled = aot_function(fn, fw_compiler=_boxed, bw_compiler=_boxed, partition_fn=split)
    try:
        with mode:
            try:
                grads = _subclass_grads(compiled(*primals), primals)  # AOTAutograd's runtime
            except Exception:
                # AOTAutograd's own runtime refuses a DeviceMesh saved for backward (a plain
                # checkpoint of a TP block saves only its inputs, the meshes among them), which
                # Dynamo holds as a constant: the graphs are made (and run here); the
                # gradients' placements from the eager block without its checkpoint
                if "bw" not in got:
                    raise
                grads = _subclass_grads((plain or fn)(*primals), primals)
    except ProfilingError:
        raise
    except Exception as exc:  # torch's own message, in one sentence
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProfilingError(
            f"torch.compile's partitioner could not trace this block ({first[:200]}); "
            "leave out --compile"
        ) from None
    wraps = [_rewrap(p, g) for p, g in zip(primals, grads, strict=True)]
    # AOTAutograd's backward returns each gradient flattened as the gradient is, a None as one
    # output (pytorch/pytorch torch/_functorch/_aot_autograd/graph_capture_wrappers.py at
    # v2.13.0: grad_input_metas = create_subclass_meta(grad_inputs)); without a DTensor the
    # gradients are not run here and each is flattened as its primal
    known = any(g is not None for g in grads)
    grad_spans = [
        len(flatten([g])) if isinstance(g, torch.Tensor) else 1 if known else len(flatten([p]))
        for p, g in zip(primals, grads, strict=True)
    ]
    return got["fw"], got["bw"], got["n"], wraps, grad_spans


def _plain_rng(gm: Any) -> None:
    """A recomputed random op (SDPA's kernels, seeded) is wrapped by the partitioner in the
    rng-state operators (``run_and_save_rng_state`` in forward, ``run_with_rng_state`` in
    backward), which the trace's dispatch modes cannot run: the op itself runs in their place
    (the saved state is a few bytes of generator state)."""
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state

    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is run_and_save_rng_state:
            node.target, changed = _run_and_save, True
        elif node.op == "call_function" and node.target is run_with_rng_state:
            node.target, changed = _run_with, True
    if changed:
        gm.recompile()


def _run_and_save(op: Any, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    return torch.empty(0, dtype=torch.uint8), op(*args, **kwargs)


def _run_with(state: torch.Tensor, op: Any, *args: Any, **kwargs: Any) -> Any:
    return op(*args, **kwargs)


def _subclass_grads(outs: Any, primals: list[torch.Tensor]) -> list[Any]:
    """Each primal's gradient from one backward of ``outs``, when a primal is a DTensor (else
    Nones: nothing to rewrap)."""
    from torch.distributed.tensor import DTensor

    if not any(isinstance(p, DTensor) for p in primals):
        return [None] * len(primals)
    from torch.utils import _pytree as pytree

    leaves = [o for o in pytree.tree_leaves(outs)
              if isinstance(o, torch.Tensor) and o.requires_grad]  # fmt: skip
    wanted = [i for i, p in enumerate(primals) if p.requires_grad]
    got = torch.autograd.grad(leaves, [primals[i] for i in wanted],
                              [torch.zeros_like(o) for o in leaves], allow_unused=True)  # fmt: skip
    grads: list[Any] = [None] * len(primals)
    for i, g in zip(wanted, got, strict=True):
        grads[i] = g
    return grads


class CompiledBlock:
    """A block's forward through its partition (made on the first call with each signature
    of its inputs, shared by every block of the same structure)."""

    def __init__(self, block: nn.Module, cache: dict[Any, Partition], target: str) -> None:
        self.block, self.cache, self.target = block, cache, target
        # the block's own class: fully_shard swaps it for a subclass (FSDPLlamaDecoderLayer,
        # torch 2.13 _fully_shard/_fully_shard.py), which must find the partitions made before
        self.kind = type(block)
        self.eager = block.forward
        self.last: tuple[Partition, int] | None = (
            None  # the partition run, the hidden state's place among its flattened primals
        )

    def _state(self) -> tuple[list[str], list[torch.Tensor]]:
        named = [*self.block.named_parameters(), *self.block.named_buffers()]
        return [n for n, _ in named], [t for _, t in named]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch.utils import _pytree as pytree

        names, state = self._state()
        leaves, spec = pytree.tree_flatten((args, kwargs))
        where = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        inputs = [leaves[i] for i in where]
        key = (self.kind, str(spec), _meta(state), _meta(inputs), str(leaves_static(leaves)),
               torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))  # fmt: skip
        part = self.cache.get(key)
        if part is None:
            part = self.cache[key] = self._partition(names, state, leaves, where, spec)
        self.last = (part, sum(part.spans[: len(state)]))
        outs = _Graphs.apply(part, *state, *inputs)
        it = iter(outs)
        out_leaves = [next(it) if is_t else None for is_t in part.out_tensor]
        return pytree.tree_unflatten(out_leaves, part.out_spec)

    def _partition(
        self, names: list[str], state: list[torch.Tensor], leaves: list[Any], where: list[int],
        spec: Any,
    ) -> Partition:  # fmt: skip
        from torch.nn.utils.stateless import _reparametrize_module
        from torch.utils import _pytree as pytree

        n = len(state)
        shape: dict[str, Any] = {}

        def run(forward: Callable[..., Any], *primals: torch.Tensor) -> tuple[torch.Tensor, ...]:
            filled = list(leaves)
            for i, x in zip(where, primals[n:], strict=True):
                filled[i] = x
            args, kwargs = pytree.tree_unflatten(filled, spec)
            with _reparametrize_module(self.block, dict(zip(names, primals[:n], strict=True))):
                out = forward(*args, **kwargs)
            out_leaves, shape["spec"] = pytree.tree_flatten(out)
            shape["tensor"] = [isinstance(x, torch.Tensor) for x in out_leaves]
            return tuple(x for x in out_leaves if isinstance(x, torch.Tensor))

        primals = [*state, *(leaves[i] for i in where)]
        # the block's forward without the checkpoint around it (torch's checkpoint(forward))
        inner = self.eager
        if isinstance(inner, functools.partial) and inner.args:
            inner = inner.args[0]
        fw, bw, outputs, wraps, grad_spans = partition(
            functools.partial(run, self.eager), primals, self.target,
            functools.partial(run, inner))  # fmt: skip
        out = next(node for node in reversed(fw.graph.nodes) if node.op == "output")
        return Partition(
            forward=fw, backward=bw, outputs=outputs, out_spec=shape["spec"],
            out_tensor=shape["tensor"], saved_nodes=list(out.args[0][outputs:]),
            spans=[len(flatten([p])) for p in primals], wraps=wraps, grad_spans=grad_spans,
        )  # fmt: skip


def _meta(tensors: list[torch.Tensor]) -> tuple[Any, ...]:
    return tuple((tuple(t.shape), t.dtype, t.requires_grad, tuple(t.stride())) for t in tensors)


def leaves_static(leaves: list[Any]) -> tuple[Any, ...]:
    """The non-tensor arguments (flags, sizes): part of what a compiled graph specializes on."""
    return tuple(None if isinstance(x, torch.Tensor) else x for x in leaves)


def prime_partitions(
    model: nn.Module,
    inputs: tuple[object, ...],
    config: Any,
    autocast: Callable[[Any], contextlib.AbstractContextManager[object]],
) -> None:
    """One forward of the model, untracked, so each block's partition is made before the
    traced steps: a partition made inside them would run the tracker's module hooks (torch's
    ModTracker registers multi-grad hooks on every module's tensors) inside AOTAutograd's
    joint trace, whose ``autograd.grad`` refuses them. Nothing without ``--compile``."""
    if not config.compile:
        return
    with autocast(config):
        model(*inputs)


def compile_model(
    model: nn.Module,
    inputs: tuple[object, ...],
    config: Any,
    blocks: nn.ModuleList | None,
    autocast: Callable[[Any], contextlib.AbstractContextManager[object]],
    prime: bool = True,
) -> str:
    """Each of ``blocks``' forward through Inductor's partition; one forward of the model
    (untracked: before the tracker starts) makes the partitions, so the traced steps only run
    them. Under FSDP2 (``prime`` False) that forward waits for ``fully_shard``
    (``prime_partitions``): a block runs on what its group gathers, under ``mixed`` bf16
    parameters where they were fp32 here. Returns the trace's note."""
    if blocks is None:
        raise ProfilingError(
            "--compile compiles the model's repeated blocks, but it has no nn.ModuleList"
        )
    cache: dict[Any, Partition] = {}
    for block in blocks:
        block.forward = CompiledBlock(block, cache, config.target)  # type: ignore[method-assign]
    if prime:  # else after fully_shard (trace.build)
        prime_partitions(model, inputs, config, autocast)
    return (
        f"torch.compile of each block: {len(cache)} partition(s) by Inductor's min-cut "
        "partitioner on fake tensors; its saved tensors traced exactly, its forward graph run "
        "op by op (Inductor's fused kernels hold fewer transients between ops)"
    )


def compile_for_real(blocks: nn.ModuleList | None) -> str:
    """A measured run's ``--compile``: ``torch.compile`` (Inductor) of each repeated block in
    place, as torchtune's ``compile_model`` does; the note for the run."""
    if blocks is None:
        raise ProfilingError(
            "--compile compiles the model's repeated blocks, but it has no nn.ModuleList"
        )
    for block in blocks:
        block.compile()
    return (
        f"torch.compile (Inductor) of each of the {len(blocks)} blocks, compiled in the first "
        "step (the warm-up steps hold the compilation)"
    )


# ------------------------------------------------------------------ what one block keeps


@dataclass(frozen=True)
class Saved:
    """What a compiled block keeps from forward to backward, as its partition says."""

    bytes: int  # new storages saved + the hidden-state input when saved
    tensors: int


def saved_by(part: Partition, state: int) -> Saved:
    """The bytes of the storages a partition saves that the block made, plus its hidden-state
    input (the block's first tensor argument) when saved — not parameters, buffers or the
    other inputs (RoPE's tables, masks: made once per model)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    placeholders = [n for n in part.forward.graph.nodes if n.op == "placeholder"]
    inputs = {StorageWeakRef(n.meta["val"].untyped_storage()): i for i, n in enumerate(placeholders)
              if isinstance(n.meta.get("val"), torch.Tensor)}  # fmt: skip
    seen: set[Any] = set()
    total = count = 0
    for node in part.saved_nodes:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        ref = StorageWeakRef(val.untyped_storage())
        if ref in seen:
            continue
        seen.add(ref)
        at = inputs.get(ref)
        if at is not None and at != state:  # a parameter, buffer or a shared input
            continue
        total += val.untyped_storage().nbytes()
        count += 1
    return Saved(bytes=total, tensors=count)
