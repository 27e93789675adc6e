"""One rank of a large world under fake tensors, at a cost that does not grow with the world.

torch's own distributed code runs here on one process for any rank of any world: a fake
process group (``FakeStore``, backend ``fake``) answers every collective with buffers of the
right shape, and a ``DeviceMesh`` of the plan's shape gives DTensor, FSDP2, tensor and context
parallelism and the pipeline stages their groups. Three things torch does assume a real world
or real tensors for, and what is done about each (within :func:`fake_world` only):

- **Sharding made one shard per rank.** FSDP2's ``FSDPParam`` splits each parameter with
  ``torch.chunk`` into as many pieces as there are ranks and keeps one: under fake tensors each
  piece is a Python object, so sharding cost grew with the world (``--gpus 10000``: 93 s;
  ``1,000,000`` never ended). :class:`LazyChunks` is the same list, each piece made only when
  FSDP reads it (its own and the first, for the padded size): the same shards, bytes and
  padding, at the cost of two.
- **A mesh's coordinates computed inside the fake mode.** ``DeviceMesh`` keeps its rank layout
  as a real tensor and computes coordinates and sub-meshes from it when FSDP or DTensor slice it
  (FSDP with tensor parallelism concatenates the two meshes inside the step): its constructor
  and its ``mesh`` run with the fake mode set aside (``unset_fake_temporarily``), as torch does
  for its own sub-meshes.
- **DTensor's caches outlive a trace** (sharding placements, keyed by op and mesh, one of which
  holds a fake tensor until a backward releases it): emptied as the fake world starts and ends.
- **DTensor's shape propagation allocates in the trace's own fake mode.** On a cache miss
  ``ShardingPropagator._propagate_tensor_meta_non_cached`` runs the op on tensors of the
  *global* shape to learn the output's shape, in ``detect_fake_mode() or FakeTensorMode()``
  (torch/distributed/tensor/_sharding_prop.py): on a GPU that is a fresh fake mode and costs no
  memory, but inside a trace it found the trace's own mode, and the tracker counted those
  global-shape shadows as allocations (a vocabulary-parallel loss's logits at the full
  vocabulary, twice: 7.8 GiB on the last stage of torchtitan's 405B plan). :func:`fake_world`
  runs it as on a GPU: with the trace's modes set aside, in a fake mode of its own.
- **Pipeline stages vote on the shapes they will exchange** with real values (an ``.item()``
  on what the neighbours sent, which a fake group never sends): :func:`static_shapes` gives a
  schedule the answer a real vote gives when every stage was built with its shapes, which ours
  are.

Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


class LazyChunks(Sequence[torch.Tensor]):
    """``torch.chunk(tensor, n, dim)`` padded with empty pieces to ``n`` (FSDP2's
    ``_chunk_with_empty``), each piece made when read: a view of the same storage, the same
    shape, or an empty tensor past the end."""

    def __init__(self, tensor: torch.Tensor, num_chunks: int, dim: int) -> None:
        self.tensor, self.n, self.dim = tensor, num_chunks, dim
        size = tensor.size(dim)
        self.step = -(-size // num_chunks) if size else 0  # torch.chunk's ceil(size / n)
        self.size = size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.n))]
        if index < 0:
            index += self.n
        if not 0 <= index < self.n:
            raise IndexError(index)
        start = index * self.step
        length = min(self.step, self.size - start)
        if length <= 0:
            # _chunk_with_empty pads with chunks[0].new_empty(0); chunks[0] is a view of tensor
            return self.tensor.new_empty(0)
        return self.tensor.narrow(self.dim, start, length)


def _lazy_chunk_with_empty(tensor: torch.Tensor, num_chunks: int, dim: int) -> LazyChunks:
    return LazyChunks(tensor, num_chunks, dim)


@contextlib.contextmanager
def _patched(owner: object, name: str, value: object) -> Iterator[bool]:
    if not hasattr(owner, name):
        yield False
        return
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield True
    finally:
        setattr(owner, name, old)


def _outside_fake(function: Any) -> Any:
    def run(*args: Any, **kwargs: Any) -> Any:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            return function(*args, **kwargs)

    return run


@contextlib.contextmanager
def lazy_shards() -> Iterator[bool]:
    """FSDP2 makes each rank's shard only (see the module); True when this torch's FSDP2 has
    the function replaced (else the sharding is torch's, at its cost)."""
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_param
    except ImportError:
        yield False
        return
    with _patched(_fsdp_param, "_chunk_with_empty", _lazy_chunk_with_empty) as done:
        yield done


def _forget_placements() -> None:
    """Empty DTensor's sharding-propagation caches: their placements outlive a trace, and a
    vocabulary-parallel embedding's ``MaskPartial`` keeps the mask of the fake mode that made it
    until its backward releases it — a trace stopped in between left the next one mixing fake
    modes."""
    try:
        from torch.distributed.tensor.debug import _clear_sharding_prop_cache
    except ImportError:  # an older torch: its caches hold no masks
        return
    _clear_sharding_prop_cache()


def _shadows_uncounted(propagate: Any) -> Any:
    """``propagate`` (DTensor's shape propagation) as it runs on a GPU: outside the trace's
    fake mode and tracker, in a fake mode of its own (see the module)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes

    own = FakeTensorMode(allow_non_fake_inputs=True)

    def run(self: object, op_schema: object) -> Any:
        with _disable_current_modes(), own:
            return propagate(self, op_schema)

    return run


@contextlib.contextmanager
def fake_world() -> Iterator[None]:
    """Sharding and meshes at a cost independent of the world size (see the module)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    init = DeviceMesh.__init__
    mesh = DeviceMesh.__dict__.get("mesh")
    propagate = ShardingPropagator.__dict__.get("_propagate_tensor_meta_non_cached")
    with contextlib.ExitStack() as stack:
        _forget_placements()
        stack.callback(_forget_placements)
        stack.enter_context(lazy_shards())
        stack.enter_context(_patched(DeviceMesh, "__init__", _outside_fake(init)))
        if isinstance(mesh, property) and mesh.fget is not None:
            stack.enter_context(_patched(DeviceMesh, "mesh", property(_outside_fake(mesh.fget))))
        if callable(propagate):
            stack.enter_context(_patched(ShardingPropagator, "_propagate_tensor_meta_non_cached",
                                         _shadows_uncounted(propagate)))  # fmt: skip
        yield


def static_shapes(schedule: object) -> None:
    """Let ``schedule``'s stages skip the shape vote (see the module): every stage is built
    with its input and output shapes."""
    try:
        from torch.distributed.pipelining.stage import (
            InferenceMode,  # pyright: ignore[reportPrivateImportUsage]  # torch 2.13: not re-exported
        )
    except ImportError:  # torch before the vote: nothing to skip
        return

    def vote(stages: list[object], *args: object) -> None:
        for stage in stages:
            stage._inference_mode = InferenceMode.STATIC  # type: ignore[attr-defined]  # torch's own field

    if hasattr(schedule, "_warmup_p2p"):
        schedule._warmup_p2p = vote  # type: ignore[attr-defined]  # an instance's, not the class's


def mesh_of(shape: dict[str, int], rank: int) -> DeviceMesh | None:
    """A fake process group for ``rank`` of a world of the mesh's size and the mesh itself
    (None with one rank); destroy it with ``torch.distributed.destroy_process_group``."""
    import math

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from profiling.errors import ProfilingError

    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except ImportError as exc:
        raise ProfilingError(
            f"this torch lacks the fake process group ({exc}); plans cannot be traced"
        ) from None
    if dist.is_initialized() and dist.get_backend() == "fake":
        dist.destroy_process_group()  # ours, left by a trace its time bound stopped
    if dist.is_initialized():
        raise ProfilingError(
            "a torch.distributed process group is already initialized; trace plans in a "
            "fresh process"
        )
    world = math.prod(shape.values()) if shape else 1
    dist.init_process_group("fake", rank=rank, world_size=max(world, 1), store=FakeStore())
    if not shape:
        return None
    return init_device_mesh("cpu", tuple(shape.values()), mesh_dim_names=tuple(shape))


__all__ = ["LazyChunks", "fake_world", "lazy_shards", "mesh_of", "static_shapes"]
