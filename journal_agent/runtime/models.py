"""Model aliases and prices, kept as data (``models.json``) and overridable per project.

``haiku`` / ``sonnet`` / ``opus`` map to the current Claude models; settings.json may remap
them (``"models": {"haiku": "claude-haiku-4-5-20251001"}``) and add prices
(``"prices": {"my-model": {"input": 1, "output": 5, "cache_write": 1.25, "cache_read": 0.1}}``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from journal_agent.errors import UserError

_DATA = Path(__file__).with_name("models.json")


class Price(BaseModel):
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


@cache
def _builtin() -> dict[str, Any]:
    return json.loads(_DATA.read_text(encoding="utf-8"))


@dataclass
class ModelTable:
    aliases: dict[str, str] = field(default_factory=dict)
    prices: dict[str, Price] = field(default_factory=dict)
    default_model: str = "sonnet"

    def resolve(self, name: str | None, *, inherit: str | None = None) -> str:
        """An alias, ``inherit`` (→ ``inherit``, the caller's model) or a full id → a model id."""
        if not name or name == "inherit":
            name = inherit or self.default_model
        # Resolve alias chains (an override may point at another alias), but never loop.
        seen: set[str] = set()
        while name in self.aliases and name not in seen:
            seen.add(name)
            name = self.aliases[name]
        return name

    def price(self, model_id: str) -> Price | None:
        return self.prices.get(model_id)


def model_table(settings: Any = None) -> ModelTable:
    """The built-in table with a project's ``models`` / ``prices`` settings applied."""
    data = _builtin()
    table = ModelTable(
        aliases=dict(data["aliases"]),
        prices={k: Price.model_validate(v) for k, v in data["prices"].items()},
        default_model=data["default_model"],
    )
    if settings is None:
        return table
    table.aliases.update(getattr(settings, "models", None) or {})
    extra = getattr(settings, "model_extra", None) or {}
    for model_id, raw in (extra.get("prices") or {}).items():
        try:
            table.prices[model_id] = Price.model_validate(raw)
        except ValidationError as exc:
            raise UserError(
                f"settings 'prices.{model_id}' is invalid ({exc.errors()[0]['msg']}); give "
                "input, output, cache_write and cache_read in USD per million tokens."
            ) from exc
    if getattr(settings, "model", None):
        table.default_model = settings.model
    return table
