"""Loading a user's model factory, ``package.module:function``, inside the trace."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping

import torch
from torch import nn

from profiling.errors import ProfilingError


def load_factory(spec: str) -> Callable[..., object]:
    """Resolve ``package.module:function`` (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ProfilingError(f"model factory {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ProfilingError(
            f"cannot import {module_name!r} for model factory {spec!r} "
            f"({type(exc).__name__}: {exc}); check the module is on PYTHONPATH"
        ) from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ProfilingError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(factory):
        raise ProfilingError(f"{spec!r} is not callable; point --model at a function")
    return factory


@contextlib.contextmanager
def _cwd_importable():
    """Like ``python -m``: the current directory is importable while the factory loads and runs."""
    added = "" not in sys.path and "." not in sys.path
    if added:
        sys.path.insert(0, "")
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove("")


def call_factory(
    spec: str,
    batch: int,
    seq: int,
    factory: Callable[..., object] | None = None,
    fake: bool = True,
    shape: Mapping[str, int] | None = None,
) -> tuple[nn.Module, tuple[object, ...]]:
    """Call ``factory`` (or the one ``spec`` names) under the active fake mode, or for real
    (``fake=False``: a measured run on this machine). ``shape``: the shape flags given beside
    it (``--layers 4`` → ``layers=4``), each passed as the factory's parameter of that name."""
    with _cwd_importable():
        return _call_factory_here(spec, batch, seq, factory, fake, dict(shape or {}))


def shape_kwargs(
    spec: str, factory: Callable[..., object], shape: Mapping[str, int]
) -> dict[str, int]:
    """``shape`` as keyword arguments of ``factory``, or one sentence for a flag it has no
    parameter of that name for: the factory builds its own model, so a flag it cannot take
    would describe a model other than the one traced or measured (it was dropped silently)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    named = {
        k for k, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }  # **kwargs passes nothing by our names: it may drop them as silently
    for field, value in shape.items():
        if field not in named:
            flag = "--" + field.replace("_", "-")
            raise ProfilingError(
                f"{flag} {value} cannot change the model factory {spec!r}: it has no "
                f"{field!r} parameter; add one (def build(batch, seq, {field}=…)) or set the "
                f"shape inside the factory and drop {flag}"
            )
    return dict(shape)


def _call_factory_here(
    spec: str,
    batch: int,
    seq: int,
    factory: Callable[..., object] | None,
    fake: bool = True,
    shape: dict[str, int] | None = None,
) -> tuple[nn.Module, tuple[object, ...]]:
    factory = factory if factory is not None else load_factory(spec)
    kwargs: dict[str, int] = shape_kwargs(spec, factory, shape or {})
    with contextlib.suppress(TypeError, ValueError):
        params = inspect.signature(factory).parameters
        kwargs |= {k: v for k, v in (("batch", batch), ("seq", seq)) if k in params}
    try:
        made = factory(**kwargs)
    except Exception as exc:
        where = (
            "it runs under fake tensors: no data-dependent Python values"
            if fake
            else "it ran for real"
        )
        raise ProfilingError(
            f"model factory {spec!r} failed: {type(exc).__name__}: {exc}; fix the factory ({where})"
        ) from None
    model, inputs = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if isinstance(made, dict):
        model, inputs = made.get("model"), made.get("inputs")
    if not isinstance(model, nn.Module):
        raise ProfilingError(
            f"model factory {spec!r} returned {type(model).__name__}; return an nn.Module, "
            "or (module, inputs)"
        )
    from torch._subclasses.fake_tensor import FakeTensor

    if fake and any(not isinstance(t, FakeTensor) for t in (*model.parameters(), *model.buffers())):
        raise ProfilingError(
            f"model factory {spec!r} returned a model with real tensors (built before the "
            "trace, e.g. at import time); construct the model inside the factory"
        )
    if inputs is None:
        make = getattr(model, "example_inputs", None)
        if make is None:
            raise ProfilingError(
                f"model factory {spec!r} returned a module without inputs; return "
                "(module, inputs) or give the module an example_inputs(batch, seq) method"
            )
        inputs = make(batch, seq)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return model, tuple(inputs)
