"""typer's conversion of option values, without pydantic for the plain ones.

typer (0.29) converts every option's value through a pydantic ``TypeAdapter`` that it builds the
first time the option is parsed, even when the value is ``None`` (the option was not given) and
even for ``str``: ``journal-agent journal list`` imported pydantic (about 0.06 s of CPU, more
than its own work) to learn that ``--tag`` and ``--root`` were absent. Here an option left out,
a ``str``, a ``list[str]`` and a plain ``Path`` are converted as typer's own converters would
(the same functions, or the values they return); anything else, and any value these do not
recognise, goes to typer's converter unchanged. ``tests/foundation/test_typer_values.py``
checks both give the same answers, so a typer release that changes its converters shows there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_MARK = "_journal_agent_light"


class _LightParam:
    """Stands where typer keeps an option's converter (``_TyperParameter._runtime_param``);
    builds typer's own converter only for a value it does not handle itself."""

    def __init__(self, descriptor: Any, build: Any) -> None:
        self._descriptor = descriptor
        self._build = build
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        many = param.multiple or param.nargs == -1
        if value is None:  # typer's RuntimeParam.coerce returns these without converting
            return () if many else None
        light = _convert(self._descriptor, value, many, param, ctx)
        if light is not _UNHANDLED:
            return light
        if self._typer is None:
            self._typer = self._build(self._descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)


_UNHANDLED = object()


def _convert(descriptor: Any, value: Any, many: bool, param: Any, ctx: Any) -> Any:
    info = descriptor.parameter_info
    annotation = descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return _UNHANDLED
    if not many and annotation is str and isinstance(value, str):
        return str(value)  # typer: _parse_cli_str
    if many and annotation == list[str] and isinstance(value, list | tuple):
        if all(isinstance(item, str) for item in value):
            return [str(item) for item in value]  # typer: parse_list of _parse_cli_str
        return _UNHANDLED
    if not many and annotation is Path and info.path_type is None and isinstance(value, str):
        from typer._param_types import coerce_cli_path

        # typer hands a str to pydantic's Path(value), then checks the path: give it the Path.
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    return _UNHANDLED


def install() -> None:
    """Put the light converter in front of typer's (once; a typer without the hook is left
    as it is: slower, never wrong)."""
    import typer.core

    build = getattr(typer.core, "build_runtime_param", None)
    if build is None or getattr(build, _MARK, False):
        return

    def build_light(descriptor: Any) -> Any:
        return _LightParam(descriptor, build)

    setattr(build_light, _MARK, True)
    typer.core.build_runtime_param = build_light  # type: ignore[attr-defined]  # typer's hook


__all__ = ["install"]
