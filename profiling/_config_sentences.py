"""A pydantic ``ValidationError`` of the training configuration as one :class:`ConfigError`
sentence, naming the CLI flag (``--seq``) or the keyword / tool field (``seq``) and the valid
choices."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, get_args

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from profiling._config_legacy import LEGACY
from profiling.config_table import flag_name
from profiling.errors import ConfigError, ProfilingError

Fields = Mapping[str, FieldInfo]  # TrainingConfig.model_fields, handed in: no import circle


def _choices(fields: Fields, field: str) -> str | None:
    info = fields.get(field)
    if info is None:
        return None
    args = [a for a in get_args(info.annotation) if a is not type(None)]
    for arg in args:
        literals = get_args(arg)
        if literals and all(isinstance(v, str) for v in literals):
            return ", ".join(literals)
    literals = get_args(info.annotation)
    if literals and all(isinstance(v, str) for v in literals):
        return ", ".join(literals)
    return None


def one_sentence(exc: ValidationError, style: str, fields: Fields) -> ConfigError:
    """Every problem of ``exc`` in one sentence; ``style`` "flag" names ``--flags``, "field"
    names keywords."""
    problems: list[str] = []
    first_field = None
    for err in exc.errors():
        loc = [str(p) for p in err["loc"] if not isinstance(p, int)]
        field = loc[0] if loc else None
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, ConfigError) and original.field:
            field = original.field
        first_field = first_field or field
        name = (flag_name(field) if style == "flag" else field) if field else None
        problems.append(_problem(err, field, name, fields))
    return _restyle(ConfigError("; ".join(problems), first_field), style, fields)


def _problem(err: Any, field: str | None, name: str | None, fields: Fields) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    msg = str(err["msg"]).removeprefix("Value error, ")
    original = ctx.get("error")
    if isinstance(original, ProfilingError):  # our own sentence, raised in a validator
        return str(original)
    if name is None:
        return msg
    if kind == "extra_forbidden":
        known = ", ".join(fields)
        return f"unknown setting {field!r}; the settings are {known}"
    if kind in ("literal_error", "enum"):
        choices = _choices(fields, field or "") or ctx.get("expected")
        return f"unknown {(field or '').replace('_', ' ')} {got!r}; {name} takes {choices}"
    if kind == "greater_than_equal":
        return f"{name} must be at least {ctx['ge']} (got {got})"
    if kind == "greater_than":
        return f"{name} must be greater than {ctx['gt']} (got {got})"
    if kind == "less_than_equal":
        return f"{name} must be at most {ctx['le']:,} (got {got}); is it a typo?"
    if kind == "less_than":
        return f"{name} must be below {ctx['lt']} (got {got})"
    if kind == "finite_number":
        return f"{name} must be a finite number (got {got})"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{name} must be a whole number (got {got!r})"
    if kind in ("float_parsing", "float_type"):
        return f"{name} must be a number (got {got!r})"
    if kind in ("bool_parsing", "bool_type"):
        return f"{name} must be true or false (got {got!r})"
    return f"{name} {msg}" if msg.startswith("must") else f"{name}: {msg}"


def _restyle(exc: ConfigError, style: str, fields: Fields) -> ConfigError:
    if style == "flag" or exc.field is None:
        return exc
    text = str(exc)
    # Longest first, so --gpus is not read as --gpu + s.
    for field in sorted([*fields, *LEGACY], key=lambda f: -len(flag_name(f))):
        text = re.sub(re.escape(flag_name(field)) + r"(?![\w-])", field, text)
    return ConfigError(text, exc.field)


__all__ = ["flag_name", "one_sentence"]
