"""Tool input models generated from ``profiling.config.TrainingConfig`` (one source of truth).

The model sees the configuration's fields, descriptions and choices as the tool's JSON schema;
the tool then builds the real configuration with ``TrainingConfig.parse(style="field")`` so a
bad combination comes back as one sentence naming the field.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from journal_agent.tools._schema import tidy_schema
from profiling.config import LEGACY, TrainingConfig


class _ConfigInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        # Older field names (dtype, world_size, recompute …) are accepted, not advertised.
        if isinstance(data, dict) and set(data) & set(LEGACY):
            from profiling.config import _map_legacy

            return _map_legacy({k: v for k, v in data.items() if v is not None})
        return data

    def config_values(self) -> dict[str, Any]:
        """What the caller set, for ``TrainingConfig.parse``."""
        own = set(type(self).extra_fields) - set(TrainingConfig.model_fields)
        return {k: v for k, v in self.model_dump(exclude_unset=True).items() if k not in own}

    extra_fields: ClassVar[tuple[str, ...]] = ()


def config_input_model(
    name: str, exclude: tuple[str, ...] = (), **extra: tuple[Any, Any]
) -> type[_ConfigInput]:
    """A tool input model: the configuration's fields (less ``exclude``) plus ``extra``."""
    fields: dict[str, Any] = {}
    for field, info in TrainingConfig.model_fields.items():
        if field in exclude or field in extra:
            continue
        annotation = info.annotation
        if field == "params":  # counts as text too: "7B", "124M"
            annotation = int | str | None
            info = Field(None, description=info.description)
        fields[field] = (annotation, info)
    model = create_model(name, __base__=_ConfigInput, **fields, **extra)
    model.extra_fields = tuple(extra)  # type: ignore[attr-defined]
    return model


__all__ = ["config_input_model"]
