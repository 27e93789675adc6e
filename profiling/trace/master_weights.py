"""Mixed precision as Megatron and DeepSpeed run it: 16-bit model, fp32 master weights.

The model's parameters and gradients are 16-bit; the optimizer keeps an fp32 copy of every
parameter (the master weights) and its own fp32 states (Adam's two moments), steps the masters
and copies them back into the 16-bit parameters. That is the ZeRO paper's 2 + 2 + 12 bytes per
parameter. ``fp32_grads=True`` also keeps an fp32 gradient buffer across steps (DeepSpeed's
extra copy: 18 bytes); without it each gradient is converted to fp32 one parameter at a time,
inside the step, and freed at once (a temporary of one parameter's size).

Imports torch: import lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


class MasterWeightOptimizer(torch.optim.Optimizer):
    """Steps fp32 master copies of 16-bit parameters with an inner optimizer.

    ``state[p]`` holds ``master`` (fp32 weights), the inner optimizer's states of that master,
    and with ``fp32_grads`` the persistent ``master_grad``; ``gradient_state_keys`` tells the
    memory tracker that the latter is a gradient, not optimizer state.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        make_inner: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
        fp32_grads: bool = False,
    ) -> None:
        params = list(params)
        super().__init__(params, {})
        self.fp32_grads = fp32_grads
        self.gradient_state_keys = ("master_grad",) if fp32_grads else ()
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        for p in params:
            master = p.detach().to(torch.float32)  # made at start-up, as Megatron does
            self.state[p]["master"] = master
            self._pairs.append((p, master))
        self.inner = make_inner([m for _, m in self._pairs])

    def _refresh_state(self) -> None:
        for p, master in self._pairs:
            self.state[p].update(self.inner.state.get(master, {}))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]  # Optimizer.step's overloads, one body
        loss = None
        if closure is not None:  # torch's contract: re-evaluate the loss, then step
            with torch.enable_grad():
                loss = closure()
        if self.fp32_grads:
            # The fp32 buffer persists across steps; the inner step sees every gradient at once.
            for p, master in self._pairs:
                if p.grad is None:
                    master.grad = None
                    continue
                buf = self.state[p].get("master_grad")
                if buf is None:
                    buf = self.state[p]["master_grad"] = p.grad.to(torch.float32)
                else:
                    buf.copy_(p.grad)
                master.grad = buf
            self.inner.step()
            for p, master in self._pairs:
                p.copy_(master)
        else:
            # One parameter at a time: its fp32 gradient lives only while it is stepped.
            for p, master in self._pairs:
                if p.grad is None:
                    continue
                master.grad = p.grad.to(torch.float32)
                self.inner.step()
                master.grad = None
                p.copy_(master)
        self._refresh_state()
        return loss
