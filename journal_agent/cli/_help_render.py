"""typer's help renderer, imported without the two parts of rich it never uses here.

``typer.rich_utils`` renders every ``--help``; importing it imports ``rich.markdown`` (for
``rich_markup_mode="markdown"``: ours is ``"rich"``) and ``rich.traceback`` (for pretty
exceptions: ours are off). Those two cost 0.05 s of CPU, a third of ``journal-agent --help``.
:func:`import_renderer` imports ``typer.rich_utils`` while each of them stands for a class that
imports the real one on first use (so a renderer set up otherwise still works), then takes the
stand-ins away: anything that imports ``rich.markdown`` later gets the real module.

It also makes the renderer read our help as the prose it is (:func:`_read_as_prose`).
"""

from __future__ import annotations

import importlib
import inspect
import re
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
        _read_as_prose(sys.modules["typer.rich_utils"])
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
    _read_as_prose(rich_utils)


def _fold_long_words(rich_utils: Any) -> None:
    """An option's help folds a word too long for its column (``https://pytorch.org/memory_viz``
    in a narrow terminal) onto the next line, where rich would cut it with "…"; so does an
    option's or a command's name (:func:`_named_table`)."""
    original = rich_utils._get_parameter_help
    if getattr(original, "folds", False):
        return
    rich_utils.Table = _named_table(rich_utils.Table)

    def folded(**kwargs: Any) -> Any:
        columns = original(**kwargs)
        for item in getattr(columns, "renderables", []):
            if hasattr(item, "overflow"):
                item.overflow = "fold"
        return columns

    folded.folds = True  # type: ignore[attr-defined]  # marks the wrapper: wrapped once
    rich_utils._get_parameter_help = folded


def _named_table(table: type) -> type:
    """typer's panels' table, whose columns before the last (option names, their short and
    negative forms, the type; a command's name) fold a name too long for them onto the next
    line: at 80 columns rich cut ``--prefetch-bucket-size`` to ``--prefetch-bucket-si…``, a
    name no one can type. (Widening the column instead starves the help column, which then
    loses letters.)"""

    class NamedTable(table):  # type: ignore[misc, valid-type]  # rich's Table, subclassed
        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            super().add_row(*cells, **kwargs)
            for column in self.columns[:-1]:
                column.overflow = "fold"

    return NamedTable


def _read_as_prose(rich_utils: Any) -> None:
    """Our help is prose, never rich markup: in ``"rich"`` mode typer kept a docstring's line
    breaks in a group's command list and in every paragraph after the first, so rich wrapped
    each source line apart and broke sentences ("… drafts and other" / "records are read …"),
    and it read ``[m:…]`` as a markup tag and dropped it ("read for  ids"). Here a paragraph's
    lines are joined (a list item or an indented line keeps its own), and the text is escaped."""
    if getattr(rich_utils._make_rich_text, "prose", False):
        return
    make_text, command_help = rich_utils._make_rich_text, rich_utils._make_command_help

    def text(*, text: str, style: str = "", markup_mode: Any) -> Any:
        from rich.markup import escape

        return make_text(text=escape(text), style=style, markup_mode=markup_mode)

    def command(*, help_text: str, markup_mode: Any) -> Any:
        first = inspect.cleandoc(help_text).split("\n\n")[0]
        return command_help(help_text=_joined(first), markup_mode=markup_mode)

    def linebreaks(paragraphs: list[str], markup_mode: Any) -> str:
        return "\n\n".join(_joined(p) for p in paragraphs)

    text.prose = True  # type: ignore[attr-defined]  # marks the wrappers: wrapped once
    rich_utils._make_rich_text = text
    rich_utils._make_command_help = command
    setattr(rich_utils, "_fix_linebreaks", linebreaks)  # noqa: B010  # vulture: typer reads it


def _joined(paragraph: str) -> str:
    """``paragraph``'s lines as one, but for a line that starts a list item or is indented
    (an example, a table) and a paragraph typer is told to keep as it is (``\\b``)."""
    if paragraph.startswith("\b"):
        return paragraph
    lines = paragraph.split("\n")
    out = lines[:1]
    for line in lines[1:]:
        if _KEEPS_ITS_LINE.match(line):
            out.append(line)
        else:
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
    return "\n".join(out)


_KEEPS_ITS_LINE = re.compile(r"\s|[-*•]\s|\d+[.)]\s|\$ ")

__all__ = ["import_renderer"]
