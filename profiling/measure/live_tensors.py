"""Exact bytes held by live CPU tensors, counted from the tensors themselves.

CPU PyTorch keeps no allocator statistics, and ``tracemalloc`` does not see tensor storage. So
while profiling runs, a :class:`~torch.utils._python_dispatch.TorchDispatchMode` looks at the
output of every operator: a storage not seen before is counted (its ``nbytes``) and gets a weak
reference whose callback uncounts it when the storage is freed. Storages that existed before
``start`` (the model, the optimizer state, the batch) are found once by walking the garbage
collector's objects. This is the same bookkeeping PyTorch's ``MemTracker`` does under fake
tensors, so a trace and a measurement count the same tensors — which makes the measurement the
trace's self-check.

What it does not see: scratch buffers a kernel allocates and frees inside one operator, memory
that is not a tensor (Python objects, libraries), tensors made by other threads, and storages
resized outside an operator (FSDP2's ``untyped_storage().resize_``). The process RSS, reported
beside it, sees all of those. Cost: one Python call per operator (a few µs each).
"""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LiveTensors(TorchDispatchMode):
    """Running total and peak of the bytes of live CPU tensor storages."""

    def __init__(self) -> None:
        super().__init__()
        self._storages: dict[int, list[Any]] = {}  # StorageImpl address -> [weakref, nbytes]
        self.current = 0
        self.peak = 0
        self.ops = 0
        self._active = False

    # -- bookkeeping

    def _freed(self, key: int, _ref: Any) -> None:
        entry = self._storages.pop(key, None)
        if entry is not None:
            self.current -= entry[1]

    def _add_tensor(self, t: torch.Tensor) -> None:
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            # A wrapper subclass (DTensor, …) holds its data in inner tensors; its own storage
            # is a placeholder of the global size. FSDP2's parameters are DTensors that are also
            # ``nn.Parameter`` instances, so the test is on the exact type, not isinstance.
            flatten = getattr(t, "__tensor_flatten__", None)
            if flatten is not None:
                names, _ = flatten()
                for name in names:
                    inner = getattr(t, name, None)
                    if isinstance(inner, torch.Tensor):
                        self._add_tensor(inner)
                return
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested: no single storage
            return
        if storage.device.type != "cpu":  # fake (meta) or accelerator tensors
            return
        key = storage._cdata
        entry = self._storages.get(key)
        nbytes = storage.nbytes()
        if entry is None:
            ref = weakref.ref(storage, lambda r, k=key: self._freed(k, r))
            self._storages[key] = [ref, nbytes]
            self.current += nbytes
        elif entry[1] != nbytes:  # resized in place (resize_, out= variants)
            self.current += nbytes - entry[1]
            entry[1] = nbytes
        else:
            return
        if self.current > self.peak:
            self.peak = self.current

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._add_tensor(leaf)
        return out

    # -- control

    def start(self) -> None:
        """Count the tensors alive now, then every tensor operators create until ``stop``."""
        with warnings.catch_warnings():
            # isinstance on a deprecated module attribute proxy warns; it holds no tensor.
            warnings.simplefilter("ignore")
            for obj in gc.get_objects():
                try:
                    if isinstance(obj, torch.Tensor):
                        self._add_tensor(obj)
                except Exception:  # an object we cannot inspect holds no tensor we count
                    continue
        self.peak = self.current
        self.__enter__()
        self._active = True

    def stop(self) -> None:
        if self._active:
            self._active = False
            self.__exit__(None, None, None)

    def reset_peak(self) -> None:
        self.peak = self.current

    @property
    def storages(self) -> int:
        return len(self._storages)
