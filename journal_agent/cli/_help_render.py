"""typer's help renderer, imported without the two parts of rich it never uses here.

``typer.rich_utils`` renders every ``--help``; importing it imports ``rich.markdown`` (for
``rich_markup_mode="markdown"``: ours is ``"rich"``) and ``rich.traceback`` (for pretty
exceptions: ours are off). Those two cost 0.05 s of CPU, a third of ``journal-agent --help``.
:func:`import_renderer` imports ``typer.rich_utils`` while each of them stands for a class that
imports the real one on first use (so a renderer set up otherwise still works), then takes the
stand-ins away: anything that imports ``rich.markdown`` later gets the real module.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# module -> the one name typer.rich_utils takes from it
_DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def _stand_in(module: str, name: str) -> type:
    """A class named ``name`` that builds (and forwards class attributes to) the real one."""

    def real() -> Any:
        return getattr(importlib.import_module(module), name)

    class _Deferred(type):
        def __getattr__(cls, attr: str) -> Any:  # Traceback.from_exception, …
            return getattr(real(), attr)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real())

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return real()(*args, **kwargs)

    return _Deferred(name, (), {"__new__": new, "__module__": module})


def import_renderer() -> None:
    """Import ``typer.rich_utils`` (once) without ``rich.markdown`` and ``rich.traceback``."""
    if "typer.rich_utils" in sys.modules:
        _fold_long_words(sys.modules["typer.rich_utils"])
        return
    placed = []
    for module, name in _DEFERRED.items():
        if module not in sys.modules:
            stand_in = types.ModuleType(module)
            setattr(stand_in, name, _stand_in(module, name))
            sys.modules[module] = stand_in
            placed.append(module)
    try:
        rich_utils = importlib.import_module("typer.rich_utils")
    finally:
        for module in placed:
            del sys.modules[module]
    _fold_long_words(rich_utils)


def _fold_long_words(rich_utils: Any) -> None:
    """An option's help folds a word too long for its column (``https://pytorch.org/memory_viz``
    in a narrow terminal) onto the next line, where rich would cut it with "…"."""
    original = rich_utils._get_parameter_help
    if getattr(original, "folds", False):
        return

    def folded(**kwargs: Any) -> Any:
        columns = original(**kwargs)
        for item in getattr(columns, "renderables", []):
            if hasattr(item, "overflow"):
                item.overflow = "fold"
        return columns

    folded.folds = True  # type: ignore[attr-defined]  # marks the wrapper: wrapped once
    rich_utils._get_parameter_help = folded


__all__ = ["import_renderer"]
