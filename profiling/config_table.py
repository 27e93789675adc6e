"""The fields of ``profiling.config.TrainingConfig`` as plain data (standard library only).

For what describes the configuration without validating one: the CLI builds ``estimate``,
``trace``, ``fit`` and ``profile``'s flags from this table, so their ``--help`` (and ``gpu``)
neither import pydantic nor build the model (0.09 s of CPU they spent on it before).
``profiling.config`` stays the one source: ``config_table.json`` beside this module is generated
from it by ``python -m profiling._config_table_gen``, and ``tests/profiling/test_config_table.py``
fails while the file differs from what the model says.

:func:`fields`: for each field, in the model's order, its ``kind`` (``bool``, ``choice``,
``int``, ``float`` or ``text``), ``choices`` (for a choice), ``default`` and ``description``.
:func:`fit_fields` and :func:`profile_fields` are ``profiling.config``'s ``FIT_FIELDS`` and
``PROFILE_FIELDS``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("config_table.json")


@functools.cache
def _load() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def flag_name(field: str) -> str:
    """A field as a CLI flag: ``seq`` is ``--seq``, ``kv_heads`` is ``--kv-heads``."""
    return "--" + field.replace("_", "-")


def fields() -> dict[str, dict[str, Any]]:
    return _load()["fields"]


def fit_fields() -> tuple[str, ...]:
    return tuple(_load()["fit_fields"])


def profile_fields() -> tuple[str, ...]:
    return tuple(_load()["profile_fields"])


# What a step's memory depends on first: shown whenever set, default or not.
_CORE = ("model", "params", "batch", "seq", "precision", "optimizer", "gpus", "zero")
# Derived from the others when the record was made, not a setting.
_DERIVED = frozenset(["shape"])


def shown(config: dict[str, Any]) -> list[tuple[str, Any]]:
    """A record's configuration as a reader wants it: the core settings whenever they are set,
    every other field only when it differs from its default; nothing unset (``None``) and
    nothing derived (the model's shape). Keys the table does not know are kept when set."""
    table = fields()
    core = [(k, config[k]) for k in _CORE if config.get(k) is not None]
    rest = []
    for key, value in config.items():
        if key in _CORE or key in _DERIVED or value is None or value in ("", [], {}):
            continue
        if key in table and value == table[key]["default"]:
            continue
        rest.append((key, value))
    return core + rest
