"""peft's ``.to`` calls on adapters it has just made, under the trace's fake tensors.

Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


@contextlib.contextmanager
def fake_safe_moves() -> Iterator[None]:
    """``Module.to`` that replaces parameters instead of swapping them: torch swaps fake
    parameters in place, which fails on the weak references the fake mode keeps; peft calls
    ``.to`` on each adapter it just created (nothing else holds those yet)."""
    original = nn.Module.to

    def to(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        device, dtype = parse_to(*args, **kwargs)
        with torch.no_grad():
            for module in self.modules():
                for key, p in list(module._parameters.items()):
                    if p is None:
                        continue
                    cast = dtype if dtype is not None and p.is_floating_point() else p.dtype
                    moved = p.to(device=device or p.device, dtype=cast)
                    if moved is not p:
                        module._parameters[key] = nn.Parameter(moved, p.requires_grad)
        return self

    nn.Module.to = to  # type: ignore[method-assign]  # restored below
    try:
        yield
    finally:
        nn.Module.to = original  # type: ignore[method-assign]  # the real method, put back


def parse_to(*args: Any, **kwargs: Any) -> tuple[torch.device | None, torch.dtype | None]:
    """``Module.to``'s device and dtype, however they were passed."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, torch.Tensor):
            device, dtype = arg.device, arg.dtype
        elif arg is not None:
            device = arg
    return (torch.device(device) if device is not None else None), dtype


__all__ = ["fake_safe_moves", "parse_to"]
