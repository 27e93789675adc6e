"""A block's forward under non-reentrant activation checkpointing, without a reference cycle.

``block.forward = functools.partial(checkpoint, block.forward)`` stores in the block's own
``__dict__`` a partial that holds the bound method, which holds the block: a cycle. Reference
counting never frees such a model; only the cyclic collector does, whenever it next runs. In
one process (a library caller, the MCP server, pytest) every earlier run's checkpointed model —
its weights, gradients and optimizer state — stayed alive until then, and a measurement's start
scan (``profiling.measure.profiler``, every live CPU tensor) counted it: each ``measure_step`` of
tiny-gpt2 with full checkpointing read about 400 KB more than the one before. Holding the bound
method weakly (``weakref.WeakMethod``) leaves no cycle, so the model goes when its last user
lets go, as an uncheckpointed one does. Imports torch.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from torch import nn


def checkpointed_forward(module: nn.Module, **extra: Any) -> Callable[..., Any]:
    """``module.forward`` run through ``torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False, **extra)``; to assign to ``module.forward``. A forward that is not
    the module's own bound method (the trace's compiled block) is held as it is."""
    from torch.utils.checkpoint import checkpoint

    forward = module.forward
    # A module compiled in place (``nn.Module.compile``: profile --compile, before checkpointing)
    # has Dynamo trace ``self.forward``: it keeps the partial Dynamo has always traced through.
    compiled = getattr(module, "_compiled_call_impl", None) is not None
    if compiled or not (inspect.ismethod(forward) and forward.__self__ is module):
        return functools.partial(checkpoint, forward, use_reentrant=False, **extra)
    own = weakref.WeakMethod(forward)

    def run(*args: Any, **kwargs: Any) -> Any:
        method = own()
        assert method is not None, "called through its module, which is alive"
        return checkpoint(method, *args, use_reentrant=False, **extra, **kwargs)

    return run


__all__ = ["checkpointed_forward"]
