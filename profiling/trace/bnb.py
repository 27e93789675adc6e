"""bitsandbytes' 8-bit and paged optimizers in the traced step.

bitsandbytes' optimizers need CUDA and the trace runs on fake cpu tensors, so
:class:`BnbOptimizer` stands in for ``bnb.optim.Adam8bit`` / ``AdamW8bit`` /
``PagedAdamW8bit`` / ``PagedAdamW`` (32-bit): it makes each parameter's states as
``Optimizer2State.init_state`` does on the first step (sizes: ``profiling.estimate.bnb``) and
updates in place, as bitsandbytes' one fused kernel per parameter does, allocating nothing.

A paged state (``get_state_buffer`` for a parameter of 10⁵ values or more) is CUDA managed
memory that PyTorch's allocator never sees, so the tracker must not see it either: it is made
on the meta device with the trace's modes set aside (no storage, no allocation event) and kept
beside the optimizer's state, as bitsandbytes keeps it in its page manager; its bytes are
reported apart (``paged_bytes``).

Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from profiling.errors import ProfilingError
from profiling.estimate.bnb import MIN_8BIT_SIZE, OPT_BLOCK, paged


class BnbOptimizer(torch.optim.Optimizer):
    """The states bitsandbytes' two-state optimizer keeps (8- or 32-bit, paged or not)."""

    def __init__(self, params: Iterable[torch.Tensor], bits: int, is_paged: bool) -> None:
        super().__init__(params, {"lr": 1e-4})
        self.bits, self.is_paged = bits, is_paged
        self.managed: dict[int, tuple[torch.Tensor, ...]] = {}  # the page manager's tensors
        self._qmaps: tuple[torch.Tensor, ...] | None = None

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]  # torch's overloads
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not self.state[p]:
                    self._init_state(p, self.state[p])
        # The update: one fused kernel per parameter, in place (nothing allocated).

    def _init_state(self, p: torch.Tensor, state: dict[str, Any]) -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        if not isinstance(p, FakeTensor):
            raise ProfilingError(
                "bitsandbytes' optimizers are represented under the trace's fake tensors only; "
                "measure them for real with bitsandbytes on a GPU"
            )
        eight = self.bits == 8 and p.numel() >= MIN_8BIT_SIZE
        dtype = torch.uint8 if eight else torch.float32
        state["step"] = 0  # a Python int in bitsandbytes: no tensor
        # (The trace's fake tensors sit on the cpu device but stand for CUDA ones, which
        # bitsandbytes pages: its cpu fallback does not apply.)
        if self.is_paged and paged(p.numel()):
            self.managed[id(p)] = (_managed(p, dtype), _managed(p, dtype))
        else:
            state["state1"] = torch.zeros_like(p, dtype=dtype)
            state["state2"] = torch.zeros_like(p, dtype=dtype)
        if eight:
            if self._qmaps is None:  # the optimizer's dynamic and udynamic maps, made once
                self._qmaps = tuple(p.new_zeros(256, dtype=torch.float32) for _ in range(2))
            state["qmap1"], state["qmap2"] = self._qmaps
            blocks = -(-p.numel() // OPT_BLOCK)
            state["absmax1"] = p.new_zeros(blocks, dtype=torch.float32)
            state["absmax2"] = p.new_zeros(blocks, dtype=torch.float32)

    def paged_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for ts in self.managed.values() for t in ts)


def _managed(p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A managed-memory buffer: outside every mode the trace runs (no fake storage, no event)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return torch.empty(p.shape, dtype=dtype, device="meta")


def paged_bytes(optimizer: torch.optim.Optimizer) -> int:
    """The managed memory of the stand-ins in ``optimizer`` (wrapped by the master-weight or
    in-backward optimizers or not)."""
    inner = getattr(optimizer, "inner", optimizer)
    each = inner.values() if isinstance(inner, dict) else [inner]
    return sum(o.paged_bytes() for o in each if isinstance(o, BnbOptimizer))


__all__ = ["BnbOptimizer", "paged_bytes"]
