"""torchtune's ``compile_loss`` as a trace sees it: the loss's per-chunk function through
AOTAutograd and Inductor's partitioner, its buffers as Inductor's fused kernels make them.

torchtune (recipes/full_finetune_single_device.py and the LoRA recipes at bd2a0fc, the commit
its README's memory tables cite) calls ``training.compile_loss(loss)`` when ``compile: True``;
for its chunked losses that is ``apply_compile_strategy``, which compiles only
``compute_cross_entropy`` — the one chunk's ``cross_entropy(logits.float(), labels,
reduction="sum")`` (CEWithChunkedOutputLoss) or the head and that cross-entropy
(LinearCrossEntropyLoss). Each chunk's call is one compiled graph.

Here that function goes through AOTAutograd with Inductor's own decompositions (what
``compile_fx`` hands it: ``log_softmax`` and ``nll_loss`` become amax, exp, sum, log, gather,
so the partitioner sees pointwise ops it may recompute) and Inductor's partitioner, on fake
tensors. The partitioner keeps, per chunk, the 16-bit logits and two fp32 values per token
(the row's max and log-sum-exp) where eager keeps the fp32 log-probabilities.

The graphs then run as Inductor's kernels would hold memory, not op by op: a buffer exists for
what a kernel writes to memory — a graph output (the loss, what is saved, a gradient), a
reduction's result, a matmul's output and its inputs — while a chain of pointwise ops (the
upcast, ``x − max``, ``exp``, the softmax's gradient) is fused into the kernel that reads it and
never held. Matmuls run for real (their FLOPs are counted). Imports torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from profiling.errors import ProfilingError

_REDUCTIONS = {"sum", "amax", "amin", "mean", "max", "min", "prod", "any", "all", "argmax",
               "argmin", "var_mean", "logsumexp"}  # fmt: skip
_FUSED = {"full", "scalar_tensor", "iota", "gather", "index", "where", "convert_element_type",
          "clone", "_to_copy", "fill", "zeros_like", "full_like", "empty_like"}  # fmt: skip


def _name(node: fx.Node) -> str:
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", "")
    return str(name).split(".")[-1]


def _is_view(node: fx.Node) -> bool:
    return bool(getattr(node.target, "is_view", False)) or _name(node) == "_unsafe_view"


def _kind(node: fx.Node) -> str:
    """'view', 'fused' (pointwise, inlined where read), 'reduction' or 'extern' (a kernel of
    its own: matmuls and anything Inductor does not generate code for)."""
    if node.op != "call_function":
        return node.op
    if _is_view(node):
        return "view"
    name = _name(node)
    if name in _REDUCTIONS:
        return "reduction"
    tags = getattr(node.target, "tags", ())
    if torch.Tag.pointwise in tags or name in _FUSED:
        return "fused"
    return "extern"


def _base(node: fx.Node) -> fx.Node:
    while _kind(node) == "view" and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return node


def _buffers(graph: fx.Graph) -> set[fx.Node]:
    """The nodes whose values Inductor writes to memory."""
    kept: set[fx.Node] = set()
    for node in graph.nodes:
        kind = _kind(node)
        if kind in ("reduction", "extern"):
            kept.add(node)
        if kind == "extern":  # its inputs are read from memory
            kept.update(_base(a) for a in node.all_input_nodes)
        if node.op == "output":
            kept.update(_base(a) for a in node.all_input_nodes)
    return {n for n in kept if n.op == "call_function"}


class _Virtual:
    """A value fused into the kernels that read it: no memory of its own, but the buffers it
    is computed from stay alive until the kernel that reads it has run."""

    def __init__(self, deps: list[torch.Tensor]) -> None:
        self.deps = deps


def _deps(values: Any) -> list[torch.Tensor]:
    from torch.utils import _pytree as pytree

    out: list[torch.Tensor] = []
    for v in pytree.tree_leaves(values, is_leaf=lambda x: isinstance(x, _Virtual)):
        if isinstance(v, _Virtual):
            out.extend(v.deps)
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


class _Kernels(fx.Interpreter):
    """Runs a graph holding what Inductor's kernels hold: each buffer made when its node runs
    (a matmul for real, a fused kernel's output as an empty tensor of its shape), freed after
    its last reader; fused values never made."""

    def __init__(self, gm: fx.GraphModule, buffers: set[fx.Node]) -> None:
        super().__init__(gm)
        self.buffers = buffers

    def run_node(self, n: fx.Node) -> Any:
        kind = _kind(n)
        if kind in ("placeholder", "output", "get_attr"):
            return super().run_node(n)
        if kind == "extern" or (kind == "view" and n in self.buffers):
            return super().run_node(n)
        args: Any = self.map_nodes_to_values((n.args, n.kwargs), n)
        if kind == "view" and not isinstance(args[0][0], _Virtual):
            return super().run_node(n)
        if n in self.buffers:
            val = n.meta["val"]
            if isinstance(val, (tuple, list)):
                return type(val)(_empty(v) for v in val)
            return _empty(val)
        return _Virtual(_deps(args))


def _empty(val: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)


def _run(gm: fx.GraphModule, buffers: set[fx.Node], *args: Any) -> tuple[Any, ...]:
    with torch.no_grad():
        return tuple(_Kernels(gm, buffers).run(*args))


class _Part:
    def __init__(self, fw: Any, bw: Any, outputs: int) -> None:
        self.fw, self.bw, self.outputs = fw, bw, outputs
        self.fw_buffers, self.bw_buffers = _buffers(fw.graph), _buffers(bw.graph)


class _Compiled(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, part: _Part, *primals: torch.Tensor) -> Any:
        result = _run(part.fw, part.fw_buffers, *primals)
        outs, saved = result[: part.outputs], result[part.outputs :]
        ctx.part = part
        ctx.others = {i: s for i, s in enumerate(saved) if not isinstance(s, torch.Tensor)}
        ctx.save_for_backward(*(s for s in saved if isinstance(s, torch.Tensor)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        part: _Part = ctx.part
        unpacked = ctx.saved_tensors  # once: a checkpoint's unpack hook allows no second time
        tensors = iter(unpacked)
        count = len(ctx.others) + len(unpacked)
        saved = [ctx.others[i] if i in ctx.others else next(tensors) for i in range(count)]
        result = _run(part.bw, part.bw_buffers, *saved, *grads)
        return (None, *result)


def _partition(fn: Callable[..., torch.Tensor], primals: list[torch.Tensor]) -> _Part:
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.decomposition import select_decomp_table

    from profiling.trace.compiled import _boxed, _plain_rng

    got: dict[str, Any] = {}

    def split(joint: Any, joint_inputs: Any, **kwargs: Any) -> Any:
        fw, bw = partition_fn(joint, joint_inputs, **kwargs)
        for graph in (fw, bw):
            _plain_rng(graph)
        got.update(fw=fw, bw=bw, n=kwargs["num_fwd_outputs"])
        return fw, bw

    compiled = aot_function(fn, fw_compiler=_boxed, bw_compiler=_boxed, partition_fn=split,
                            decompositions=select_decomp_table())  # fmt: skip
    try:
        compiled(*primals)
    except Exception as exc:  # torch's own message, in one sentence
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProfilingError(
            f"torch.compile's partitioner could not trace the loss ({first[:200]}); "
            "leave out --compile"
        ) from None
    return _Part(got["fw"], got["bw"], got["n"])


def _meta(t: torch.Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.requires_grad, str(t.device))


def compiled(fn: Callable[..., torch.Tensor], cache: dict[Any, Any]) -> Callable[..., torch.Tensor]:
    """``torch.compile(fn)`` for a function of tensors: partitioned once per signature of its
    inputs (by the untracked forward ``compiled.compile_model`` runs; ``cache`` is the model's,
    so the traced step finds it), run as Inductor's kernels hold memory."""

    @functools.wraps(fn)
    def run(*tensors: torch.Tensor) -> torch.Tensor:
        key = (fn.__qualname__, *(_meta(t) for t in tensors))
        part = cache.get(key)
        if part is None:  # compile_model's forward before the tracker starts: made then
            part = cache[key] = _partition(fn, list(tensors))
        return _Compiled.apply(part, *tensors)

    return run
