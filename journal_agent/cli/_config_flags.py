"""CLI flags generated from ``profiling.config.TrainingConfig``: one source for every command.

``@config_flags()`` gives a command one ``--flag`` per configuration field (help text, choices
and default taken from the field), plus the older spellings as hidden flags, and hands the
command a dict of the values the user actually gave. Values reach the configuration as typed
text, so a bad number or choice gets the configuration's own one-sentence error (naming the
flag and the valid choices) instead of a usage dump.

The fields are read from ``profiling.config_table`` (the model's fields as plain data, generated
from it and held to it by a test): describing the flags (``estimate --help``) never imports
pydantic; validating the values (``TrainingConfig.parse``) does, in the command.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Annotated, Any, get_type_hints

import typer

from profiling import config_table
from profiling._config_legacy import LEGACY

PANEL = "Workload (shared by estimate, trace, profile and fit)"
# Older flags, hidden from --help but still accepted (profiling.config.LEGACY maps them).
_LEGACY_FLAGS: dict[str, tuple[Any, dict[str, Any]]] = {
    "dtype": (str | None, {"param_decls": ["--dtype"]}),
    "param_dtype": (str | None, {"param_decls": ["--param-dtype"]}),
    "recompute": (str | None, {"param_decls": ["--recompute"]}),
    "flash_attention": (bool | None, {"param_decls": ["--flash-attention"], "is_flag": True}),
    "world_size": (str | None, {"param_decls": ["--world-size"]}),
    "no_reshard": (bool | None, {"param_decls": ["--no-reshard"], "is_flag": True}),
}
_METAVARS = {"int": "INT", "float": "FLOAT", "text": "TEXT"}


def _option(field: str) -> inspect.Parameter:
    spec = config_table.fields()[field]
    help_text = spec["description"]
    flag = config_table.flag_name(field)
    if spec["kind"] == "bool":
        # Every switch has its --no- form: a value read from a recipe (--from) is overridden
        # either way, as every flag given wins over the file.
        decls = [f"{flag}/--no-{flag[2:]}"]
        option = typer.Option(*decls, help=help_text, rich_help_panel=PANEL, show_default=False)
        return inspect.Parameter(
            field,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[bool | None, option],
        )
    choices = spec["choices"]
    if choices:
        help_text = f"{help_text} One of: {', '.join(choices)}."
    if spec["default"] is not None:  # (rich would read square brackets as markup)
        help_text += f" Default: {spec['default']}."
    option = typer.Option(
        flag,
        help=help_text,
        metavar="CHOICE" if choices else _METAVARS[spec["kind"]],
        rich_help_panel=PANEL,
        show_default=False,
    )
    return inspect.Parameter(
        field,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, option],
    )


def _legacy_option(name: str) -> inspect.Parameter:
    annotation, spec = _LEGACY_FLAGS[name]
    spec = dict(spec)
    decls = spec.pop("param_decls")
    option = typer.Option(*decls, hidden=True, help=LEGACY[name], **spec)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[annotation, option]
    )


def config_flags(
    include: Iterable[str] | None = None, exclude: Iterable[str] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate ``command(config_values, **own_options)`` with the configuration's flags.

    ``config_values`` holds only what the user gave (legacy spellings included), ready for
    ``TrainingConfig.parse(**config_values)``.
    """
    fields = [f for f in (include or config_table.fields()) if f not in set(exclude)]
    legacy = [name for name in _LEGACY_FLAGS if name not in set(exclude)]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = get_type_hints(command, include_extras=True)  # the command's own Annotated flags
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in list(inspect.signature(command).parameters.values())[1:]
        ]
        names = set(fields) | set(legacy)

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            values = {k: v for k, v in kwargs.items() if k in names and v is not None}
            rest = {k: v for k, v in kwargs.items() if k not in names}
            return command(values, **rest)

        params = [_option(f) for f in fields] + [_legacy_option(n) for n in legacy]
        params += [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # typer reads it
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


__all__ = ["PANEL", "config_flags"]
