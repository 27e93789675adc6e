"""What a model factory's signature says, read without calling it (and without torch)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Any


def default_seq(spec: str, factory: Callable[..., object] | None = None) -> int | None:
    """The default of the factory's ``seq`` parameter (``def build(batch=8, seq=1024)``), or
    None: it has none, or the factory cannot be loaded (the trace then says why)."""
    if factory is None:
        factory = _load(spec)
    if factory is None:
        return None
    try:
        param = inspect.signature(factory).parameters.get("seq")
    except (TypeError, ValueError):
        return None
    if param is None or isinstance(param.default, bool) or not isinstance(param.default, int):
        return None
    return param.default if param.default > 0 else None


def takes_seq(spec: str, factory: Callable[..., object] | None = None) -> bool:
    """Whether the factory is given the sequence length (it has a ``seq`` parameter)."""
    factory = factory if factory is not None else _load(spec)
    try:
        return factory is not None and "seq" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def _load(spec: str) -> Callable[..., object] | None:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        return None
    added = "" not in sys.path and "." not in sys.path
    if added:
        sys.path.insert(0, "")  # like ``python -m``: the current directory is importable
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception:
        return None
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove("")
    return target if callable(target) else None
