"""DDP's gradient buckets on fake tensors, made and rebuilt as torch's Reducer makes them.

Plain data parallelism (``--gpus N``, N > 1, nothing sharded) is torch's
``DistributedDataParallel`` with its defaults (find_unused_parameters=False,
gradient_as_bucket_view=False, bucket_cap_mb=None), as accelerate passes it. The real module
does not survive fake tensors (its wrap verifies the parameters' data; the second forward's
``sync_bucket_indices`` reads a broadcast int tensor), so the buckets are made by hand, from
torch's own assignment (``dist._compute_bucket_assignment_by_size``, the C++
``compute_bucket_assignment_by_size``), at the moments torch makes them (torch 2.13
``torch/nn/parallel/distributed.py``, ``c10d/reducer.cpp``):

- at wrap time, before the first step (``_ddp_init_helper``): ``_BucketCapacityConfig.
  compute_bucket_size_limits`` gives ``[sys.maxsize]`` without ``find_unused_parameters``, so
  one bucket per dtype holds every trainable parameter (``_build_params_for_reducer``:
  ``requires_grad``, a tied weight once), in the Reducer's reversed order;
- at the second forward (``_pre_forward`` → ``reducer._rebuild_buckets()``): the parameters in
  the order their gradients were ready in the first backward (``autograd_hook``'s
  ``push_rebuilt_params``; a post-accumulate-grad hook here), assigned with the limits
  ``[dist._DEFAULT_FIRST_BUCKET_BYTES, 25 MiB]`` (``_DEFAULT_BUCKET_CAP_MB``: the first bucket
  1 MiB only when ``bucket_cap_mb`` is None); ``initialize_buckets`` clears the old buckets
  before ``at::empty`` makes the new ones, so both are never alive together.

Each bucket is ``at::empty({Σ numel}, dtype)``: no padding, so the bytes are Σ numel·element
size whatever the cap. The copies in and out (``mark_variable_ready_dense``,
``copy_bucket_to_grad``) and the in-place allreduce allocate nothing; ``.grad`` is made as on one
GPU beside them. The tracker files them under a category of their own, ``buckets``.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

    from profiling.config import TrainingConfig
    from profiling.trace.tracker import StepTracker

CAP_BYTES = 25 * 1024 * 1024  # torch/nn/parallel/distributed.py _DEFAULT_BUCKET_CAP_MB = 25


def is_ddp(config: TrainingConfig) -> bool:
    """Whether the traced step is DDP's: more than one rank, nothing sharded."""
    return config.world_size > 1 and not (config.fsdp or config.sharded)


@functools.cache
def bucket_ref() -> Any:
    """The tracker's reference type for a bucket (as FSDPMemTracker's ``_FSDPRefType``)."""
    from torch.distributed._tools.mem_tracker import _RefType

    class _DDPRefType(_RefType):
        BUCKET = "DDP Bucket"  # profiling.trace.tracker._CATEGORY: "buckets"

    return _DDPRefType.BUCKET


class Buckets:
    """The Reducer's buckets of one traced loop: the first step's, then the rebuilt ones."""

    @classmethod
    def of(cls, config: TrainingConfig, model: nn.Module, tracker: StepTracker) -> Buckets:
        """The buckets of ``config``'s DDP (its find_unused_parameters, gradient_as_bucket_view)."""
        return cls(model, tracker, config.ddp_find_unused, view=config.ddp_bucket_view)

    def __init__(
        self, model: nn.Module, tracker: StepTracker, find_unused: bool = False, cap: int = 0,
        view: bool = False,
    ) -> None:  # fmt: skip
        from torch._C._distributed_c10d import _DEFAULT_FIRST_BUCKET_BYTES as _FIRST_BYTES
        from torch._C._distributed_c10d import _compute_bucket_assignment_by_size

        self.params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        self.tracker = tracker
        self.ready: list[int] = []
        self.handles = [
            p.register_post_accumulate_grad_hook(functools.partial(self._mark, i))
            for i, p in enumerate(self.params)
        ]
        # find_unused_parameters: [1 MiB, 25 MiB] from the wrap, never rebuilt (_pre_forward's
        # should_rebuild_buckets: static graph or not find_unused; profiling.trace.ddp_unused)
        self.find_unused = find_unused
        # an explicit bucket_cap_mb (``cap`` bytes) is the first bucket's cap too
        # (_BucketCapacityConfig: the 1 MiB first bucket only with bucket_cap_mb=None)
        self.caps = [cap, cap] if cap else [_FIRST_BYTES, CAP_BYTES]
        limits = self.caps if find_unused else [sys.maxsize]
        indices, _ = _compute_bucket_assignment_by_size(self.params, limits)
        self.tensors = self._make(list(reversed(indices)))  # the Reducer's order
        if find_unused:  # its map of the parameters used and _DDPSink's clones, held as long
            from profiling.trace.ddp_unused import finds_unused

            self.unused = finds_unused(model, self.params, tracker, bucket_ref())
        self.first = [self._bytes(t) for t in self.tensors]
        self.rebuilt: list[int] = []
        self.view = view
        if view:  # hooked once the tracker has hooked every gradient (its pre-forwards): after
            self._hooking = model.register_forward_hook(self._hook_views)  # its retyping

    def _mark(self, index: int, _param: torch.Tensor) -> None:
        if index not in self.ready:
            self.ready.append(index)

    def _hook_views(self, _module: nn.Module, _args: Any, _output: Any) -> None:
        self._hooking.remove()
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(functools.partial(self._to_view, i))

    def _to_view(self, index: int, param: torch.Tensor) -> None:
        """gradient_as_bucket_view: ``mark_variable_ready_dense`` copies the gradient autograd
        made into its bucket's view and sets ``grad = bucket_view`` (c10d/reducer.cpp), so the
        gradient made is let go and ``.grad`` is the bucket's (filed under the buckets)."""
        bucket, offset = self.where[index]
        grad = param.grad
        if grad is None:
            return
        view = self.tensors[bucket][offset : offset + param.numel()].view_as(param)
        if not grad.is_set_to(view):
            view.copy_(grad)
            param.grad = view

    @staticmethod
    def _bytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    def _make(self, indices: list[list[int]]) -> list[torch.Tensor]:
        import torch

        ref = bucket_ref()
        for snap in self.tracker._curr_mem_snap.values():
            snap.setdefault(ref, 0)
        out = []
        self.where: dict[int, tuple[int, int]] = {}  # a parameter's bucket and offset in it
        for bucket in indices:
            first = self.params[bucket[0]]
            numel = 0
            for i in bucket:
                self.where[i] = (len(out), numel)
                numel += self.params[i].numel()
            t = torch.empty(numel, dtype=first.dtype, device=first.device)
            self.tracker._update_and_maybe_create_winfos(t, ref)
            out.append(t)
        return out

    def rebuild(self, listed: bool = True) -> str:
        """The second forward's rebuild, in the first backward's gradient-ready order (none
        where a trainable parameter got no gradient: DDP then stops with "Expected to have
        finished reduction", which needs find_unused_parameters=True); returns the note, the
        buckets' sizes ``listed`` (not in a block-scaled sample, whose model is smaller)."""
        from torch._C._distributed_c10d import _compute_bucket_assignment_by_size

        for handle in self.handles:
            handle.remove()
        if self.find_unused:  # profiling.trace.ddp_unused adds the used map and the clones
            sizes = f" ({_sizes(self.first)} B)" if listed else ""
            return (
                "DDP's Reducer with find_unused_parameters=True: its buckets the first 1 MiB, "
                f"the rest up to 25 MiB{sizes}, never rebuilt, alive at every moment "
                f"{self._beside()}; its map of the parameters used (int32 each); _DDPSink's "
                "clone of every output at forward's end"
            )
        if sorted(self.ready) == list(range(len(self.params))):
            ordered = [self.params[i] for i in self.ready]
            indices, _ = _compute_bucket_assignment_by_size(
                ordered, self.caps, [False] * len(ordered), self.ready
            )
            self.tensors.clear()  # initialize_buckets: buckets_.clear() before the at::empty
            self.tensors = self._make(indices)
            self.rebuilt = [self._bytes(t) for t in self.tensors]
        first = f" ({_sizes(self.first)} B)" if listed else ""
        rebuilt = f" ({_sizes(self.rebuilt) or 'not rebuilt'} B)" if listed else ""
        return (
            f"DDP's Reducer buckets (torch's defaults): the first step one per dtype{first}, "
            f"rebuilt at the second forward in the gradients' ready order, the first 1 MiB and "
            f"the rest up to 25 MiB{rebuilt}, alive at every moment {self._beside()}"
        )

    def _beside(self) -> str:
        if self.view:
            return "(gradient_as_bucket_view=True: each .grad a view of its bucket once ready)"
        return "beside .grad (gradient_as_bucket_view=False)"


def _sizes(values: list[int]) -> str:
    return ", ".join(f"{v:,}" for v in values)


__all__ = ["CAP_BYTES", "Buckets", "bucket_ref", "is_ddp"]
