"""DDP with ``find_unused_parameters=True`` on fake tensors (``--ddp-find-unused``; what it
holds: ``profiling.estimate.ddp_unused``): the Reducer's device map of the parameters used and
``_DDPSink``'s clones of the wrapped module's outputs, made as torch makes them.

torch 2.13 ``torch/nn/parallel/distributed.py``: ``_post_forward`` flattens the output
(``tree_flatten``: a transformers ``ModelOutput`` is a pytree of its tensors), runs every
tensor through ``_DDPSink.apply``, whose forward returns ``inp.clone()`` of each (all of them
at once), and rebuilds the output from the clones of those with a ``grad_fn`` (the others
keep their original). DDP wraps the transformers model (accelerate's ``prepare``), so the
hook sits on it where the traced module holds one (``.model``, whose forward computed the
loss), else on the traced module itself. ``c10d/reducer.cpp`` ``initialize_local_used_map``
(run by the constructor only with find_unused): ``local_used_map_dev_ = at::empty({n},
kInt)`` on the parameters' device. Imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch import nn
    from torch.utils.hooks import RemovableHandle

    from profiling.trace.tracker import StepTracker


def finds_unused(
    model: nn.Module, params: list[torch.Tensor], tracker: StepTracker, ref: Any
) -> tuple[torch.Tensor, list[RemovableHandle]]:
    """What DDP holds with find_unused_parameters beside its buckets (kept by the caller, as
    the Reducer keeps them): the device's used map for the bucketed ``params``, filed under
    the buckets' reference type ``ref``, and the sink's hooks."""
    device = params[0].device if params else None
    used = torch.empty(len(params), dtype=torch.int32, device=device)
    tracker._update_and_maybe_create_winfos(used, ref)
    return used, sink_hooks(model)


def _sink(output: Any) -> Any:
    from torch.utils._pytree import tree_flatten, tree_unflatten

    flat, spec = tree_flatten(output)
    clones = [t.clone() if isinstance(t, torch.Tensor) else t for t in flat]
    kept = [
        c if isinstance(t, torch.Tensor) and t.grad_fn is not None else t
        for t, c in zip(flat, clones, strict=True)
    ]
    del clones
    return tree_unflatten(kept, spec)


def sink_hooks(model: nn.Module) -> list[RemovableHandle]:
    """Forward hooks that return ``_DDPSink``'s clones of the DDP-wrapped module's output: on
    the transformers model inside the traced module when it runs (its loss computed there),
    else on the traced module (a loss computed around the transformers model, or a model of
    our own)."""
    from torch import nn

    inner = getattr(model, "model", None)
    ran = [False]

    def on_inner(_m: nn.Module, _args: Any, output: Any) -> Any:
        ran[0] = True
        return _sink(output)

    def on_outer(_m: nn.Module, _args: Any, output: Any) -> Any:
        if ran[0]:
            ran[0] = False
            return None
        return _sink(output)

    handles = []
    if isinstance(inner, nn.Module):
        handles.append(inner.register_forward_hook(on_inner))
    handles.append(model.register_forward_hook(on_outer))
    return handles


__all__ = ["finds_unused", "sink_hooks"]
