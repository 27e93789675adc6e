"""Lazy public names for a package's ``__init__`` (PEP 562), so importing it stays cheap.

    __getattr__, __dir__ = lazy_exports(__name__, {"trace_step": "profiling.trace.step", ...})

A value is ``"module"`` (the same name there) or ``("module", "attribute")`` (exported under
another name). The module is imported on first access and the value cached in the package's
namespace, so later lookups are plain attribute reads. Used by ``profiling`` and by
``journal_agent``'s packages; it lives here because profiling must not import journal_agent.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str | tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, resolving ``exports`` on first use."""
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        try:
            where = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, attr = (where, name) if isinstance(where, str) else where
        value = getattr(importlib.import_module(module), attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
