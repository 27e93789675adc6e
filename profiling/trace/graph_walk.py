"""A compiled block's graphs run op by op, as the trace runs them (``profiling.trace.compiled``):
the bytes they hold at their highest, read from the graphs without running them.

The trace runs a partition's forward and backward graphs through their generated code, which
drops each value after its last use (FX's ``delete_unused_values``); what the caller passes in
stays alive to the end (the saved tensors and the gradients reaching the block are held by the
caller's locals and autograd), and what a graph returns is alive when it returns. A value's
bytes are its storage's, counted once however many views of it there are. Walking the nodes in
order with that rule gives the trace's bytes between any two ops: what the estimate takes for a
recomputed block's backward. Imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from profiling.trace.compiled import Partition


@dataclass(frozen=True)
class Walk:
    """One graph's run: the bytes it made that were alive at its highest, and at its end."""

    peak: int
    end: int


def _storages(val: Any) -> list[Any]:
    from torch.multiprocessing.reductions import StorageWeakRef

    vals = val if isinstance(val, list | tuple) else [val]
    return [
        (StorageWeakRef(v.untyped_storage()), v.untyped_storage().nbytes())
        for v in vals
        if isinstance(v, torch.Tensor)
    ]


def walk(gm: Any) -> Walk:
    """Bytes the graph's own ops hold (its placeholders not counted: the caller holds them),
    at the highest moment between two ops, and when it returns (its outputs)."""
    nodes = list(gm.graph.nodes)
    last: dict[Any, int] = {}
    for i, node in enumerate(nodes):
        for arg in node.all_input_nodes:
            last[arg] = i
    given = {ref for n in nodes if n.op == "placeholder" for ref, _ in _storages(n.meta.get("val"))}
    out = next(n for n in reversed(nodes) if n.op == "output")
    returned = set(out.all_input_nodes)
    owners: dict[Any, set[Any]] = {}  # storage -> the live nodes that reference it
    sizes: dict[Any, int] = {}
    live = peak = 0
    for i, node in enumerate(nodes):
        if node.op == "call_function":
            for ref, size in _storages(node.meta.get("val")):
                if ref in given:
                    continue
                if ref not in owners or not owners[ref]:
                    owners[ref], sizes[ref] = set(), size
                    live += size
                owners[ref].add(node)
            peak = max(peak, live)
        for arg in node.all_input_nodes:
            if last.get(arg) == i and arg not in returned:
                live -= _release(arg, owners, sizes)
        if node.op == "call_function" and node not in last and node not in returned:
            live -= _release(node, owners, sizes)  # made and never used
    return Walk(peak=peak, end=live)


@dataclass(frozen=True)
class Recomputed:
    """A checkpointed compiled block's backward, as the trace runs it: the gradient reaching
    the block (``tangents``, alive throughout), its forward graph run again (``forward``: what
    it made at its highest, the block's output and saved tensors among them), then the
    backward graph beside the saved tensors the block made (``saved``: its input, parameters
    and other inputs are held by others)."""

    tangents: int
    forward: int
    saved: int
    backward: int

    @property
    def held(self) -> int:
        """Bytes above what is held without the block, at its backward's highest."""
        return self.tangents + max(self.forward, self.saved + self.backward)


def recomputed(part: Partition) -> Recomputed:
    """The walk of a partition recomputed in backward (``Recomputed``)."""
    nodes = list(part.forward.graph.nodes)
    given = {r for n in nodes if n.op == "placeholder" for r, _ in _storages(n.meta.get("val"))}
    out = next(n for n in reversed(nodes) if n.op == "output")
    seen: dict[Any, int] = {}
    for node in part.saved_nodes:
        for ref, size in _storages(node.meta.get("val")):
            if ref not in given:
                seen[ref] = size
    outs = out.args[0][: part.outputs]
    tangents = sum(size for n in outs for _, size in _storages(n.meta["val"]))
    return Recomputed(
        tangents=tangents, forward=walk(part.forward).peak, saved=sum(seen.values()),
        backward=walk(part.backward).peak,
    )  # fmt: skip


def param_grads(part: Partition, state: int) -> int:
    """The bytes of the gradients the backward graph returns for the block's parameters (its
    first ``state`` flattened primals; a frozen one's is None), each storage once: what the
    block's backward leaves in its weights' ``.grad`` (AccumulateGrad takes the tensor itself
    on a step's first accumulation, torch/csrc/autograd/functions/accumulate_grad.h)."""
    out = next(n for n in reversed(part.backward.graph.nodes) if n.op == "output")
    seen: dict[Any, int] = {}
    for node in out.args[0][:state]:
        if node is not None:
            seen.update(_storages(node.meta.get("val")))
    return sum(seen.values())


def _release(node: Any, owners: dict[Any, set[Any]], sizes: dict[Any, int]) -> int:
    freed = 0
    for ref, _ in _storages(node.meta.get("val")):
        holders = owners.get(ref)
        if holders and node in holders:
            holders.discard(node)
            if not holders:
                freed += sizes[ref]
    return freed


__all__ = ["Recomputed", "Walk", "param_grads", "recomputed", "walk"]
