"""The optimizer in backward (torchtune's ``optimizer_in_bwd``): one optimizer per parameter,
stepped by a post-accumulate-grad hook the moment that parameter's gradient is ready, the
gradient freed at once. The step after backward then has nothing left to do, and the full set of
gradients never exists. Imports torch: import lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn


class InBackwardOptimizer(torch.optim.Optimizer):
    """Per-parameter inner optimizers, stepped from backward (see the module doc). Its own
    ``step`` and ``zero_grad`` do nothing: the hooks did both."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        make_inner: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    ) -> None:
        params = list(params)
        super().__init__(params, {})
        self.inner = {p: make_inner([p]) for p in params}
        self._handles: list[Any] = []

    def install(self, model: nn.Module) -> None:
        """The hooks, registered when the first forward ends: after the memory tracker's own
        (installed as each module first runs), so it sees each gradient before it is freed."""

        def hook_them(*_: object) -> None:
            if self._handles:
                return
            for p, inner in self.inner.items():
                self._handles.append(
                    p.register_post_accumulate_grad_hook(
                        lambda param, inner=inner: self._step_one(param, inner)
                    )
                )

        model.register_forward_hook(hook_them)

    @staticmethod
    def _step_one(param: torch.Tensor, inner: torch.optim.Optimizer) -> None:
        inner.step()
        param.grad = None

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]  # Optimizer.step's overloads, one body
        return closure() if closure is not None else None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to zero: every gradient was freed when its parameter was stepped."""


__all__ = ["InBackwardOptimizer"]
