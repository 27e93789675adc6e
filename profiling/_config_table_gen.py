"""Writes ``profiling/config_table.json`` from ``profiling.config``: ``python -m
profiling._config_table_gen`` after changing a field of ``TrainingConfig`` (a test says when).

Apart from ``profiling.config_table``, which must stay free of pydantic and of ``config``.
"""

from __future__ import annotations

import json
from typing import Any, get_args, get_origin

from profiling.config import FIT_FIELDS, PROFILE_FIELDS, TrainingConfig
from profiling.config_table import TABLE


def generated() -> dict[str, Any]:
    """The table as ``profiling.config`` says it now."""
    fields = {}
    for name, info in TrainingConfig.model_fields.items():
        kind, choices = _kind(info.annotation)
        fields[name] = {
            "kind": kind,
            "choices": list(choices),
            "default": info.default,
            "description": info.description or "",
        }
    return {
        "fields": fields,
        "fit_fields": list(FIT_FIELDS),
        "profile_fields": list(PROFILE_FIELDS),
    }


def _kind(annotation: Any) -> tuple[str, tuple[str, ...]]:
    """What the CLI needs to know of a field's type: its kind and, for a choice, the choices."""
    if get_origin(annotation) in (list, tuple):  # a comma-separated list: its help names the items
        return "text", ()
    members = [a for a in (annotation, *get_args(annotation)) if a is not type(None)]
    if bool in members:
        return "bool", ()
    if int in members:  # a count that also takes a word ("auto"): its help says the word
        return "int", ()
    for arg in members:
        values = get_args(arg) if get_origin(arg) is not None else ()
        if values and all(isinstance(v, str) for v in values):
            return "choice", tuple(values)
    kinds = {a for a in members if isinstance(a, type)}
    if int in kinds:
        return "int", ()
    if float in kinds:
        return "float", ()
    return "text", ()


if __name__ == "__main__":
    TABLE.write_text(json.dumps(generated(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {TABLE}")
