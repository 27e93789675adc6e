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

import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from profiling.errors import ProfilingError
from profiling.estimate.bnb import MIN_8BIT_SIZE, OPT_BLOCK, paged
from profiling.estimate.torchao_optim import BLOCK, FLUSH_BYTES, quantized


class BnbOptimizer(torch.optim.Optimizer):
    """The states bitsandbytes' two-state optimizer keeps (8- or 32-bit, paged or not)."""

    def __init__(
        self, params: Iterable[torch.Tensor], bits: int, is_paged: bool, torchao: bool = False
    ) -> None:
        super().__init__(params, {"lr": 1e-4})
        self.bits, self.is_paged, self.torchao = bits, is_paged, torchao
        self.managed: dict[int, tuple[torch.Tensor, ...]] = {}  # the page manager's tensors
        self._qmaps: tuple[torch.Tensor, ...] | None = None

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]  # torch's overloads
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not self.state[p]:
                    self._init_state(p, self.state[p])
                if self.torchao:
                    torchao_step(p)
        # bitsandbytes' update: one fused kernel per parameter, in place (nothing allocated).

    def _init_state(self, p: torch.Tensor, state: dict[str, Any]) -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        if not isinstance(p, FakeTensor):
            raise ProfilingError(
                "bitsandbytes' optimizers are represented under the trace's fake tensors only; "
                "measure them for real with bitsandbytes on a GPU"
            )
        if self.torchao:
            state.update(torchao_states(p))
            return
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


def torchao_states(p: torch.Tensor) -> dict[str, torch.Tensor]:
    """torchao's AdamW8bit ``_new_buffer`` for both states (``profiling.estimate.torchao_optim``
    has the source): an 8-bit tensor's codes, fp32 scales and its own map, or a copy of the
    parameter's dtype. The step counter is a host tensor: not made here."""
    n, out = p.numel(), {}
    for name in ("exp_avg", "exp_avg_sq"):
        if not quantized(n):
            out[name] = torch.zeros_like(p)
            continue
        out[f"{name}.codes"] = torch.zeros_like(p, dtype=torch.uint8)
        out[f"{name}.scale"] = p.new_zeros(n // BLOCK, dtype=torch.float32)
        out[f"{name}.qmap"] = p.new_zeros(256, dtype=torch.float32)
    return out


# The shapes whose step was compiled, per trace (its fake mode: one process's compile cache).
_COMPILED: weakref.WeakKeyDictionary[Any, set[tuple[Any, ...]]] = weakref.WeakKeyDictionary()


def torchao_step(p: torch.Tensor) -> None:
    """What torchao's compiled step allocates and frees for an 8-bit tensor: both new states
    and both new scale vectors in fp32 (Inductor's buffers, measured on CUDA); a plain-state
    tensor is updated in place. The first step of a shape (``torch.compile``'s first call)
    also autotunes its kernels on the real arguments: a clone of each argument the kernel
    mutates (the parameter and both codes; a plain-state tensor's fused kernel, the parameter
    and both states) beside the benchmark's L2 flush buffer
    (``profiling.estimate.torchao_optim`` has the source)."""
    n = p.numel()
    seen = _COMPILED.setdefault(p.fake_mode, set())  # type: ignore[attr-defined]  # a FakeTensor (_init_state)
    key = (tuple(p.shape), p.dtype)
    first = key not in seen
    seen.add(key)
    scratch = (
        [p.new_empty(m, dtype=torch.float32) for m in (n, n, n // BLOCK, n // BLOCK)]
        if quantized(n)
        else []
    )
    if first:
        mutated = (p.dtype, torch.uint8, torch.uint8) if quantized(n) else (p.dtype,) * 3
        scratch += [p.new_empty(n, dtype=dtype) for dtype in mutated]
        scratch.append(p.new_empty(FLUSH_BYTES // 4, dtype=torch.int32))
    del scratch


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


def eight_bit_note(optimizer: str, is_paged: bool, torchao: bool) -> str:
    """The trace's note on the stand-in it ran."""
    if torchao:
        return (
            "optimizer adam8bit: torchao's AdamW8bit represented (its step is compiled for "
            "CUDA): 8-bit states for tensors of 4,096 values or more that divide by 256, the "
            "others in the parameter's dtype; each 8-bit step holds both new states and scales "
            "in fp32, as Inductor's kernels do"
        )
    bits = "8-bit" if optimizer == "adam8bit" else "32-bit"
    return (
        f"optimizer {optimizer}: bitsandbytes' {'paged ' * is_paged}{bits} "
        "Adam represented (it needs CUDA): its states as init_state makes them, updated in "
        "place by one fused kernel per parameter (no temporaries)"
        + (
            "; the paged states (parameters of 10^5 values or more) are CUDA managed memory, "
            "outside PyTorch's allocator: not traced, reported apart"
            if is_paged
            else ""
        )
    )


__all__ = ["BnbOptimizer", "eight_bit_note", "paged_bytes", "torchao_states", "torchao_step"]
