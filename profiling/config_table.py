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
