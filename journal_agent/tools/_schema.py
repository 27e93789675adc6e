"""Make pydantic's JSON schema look like Claude Code's: optional fields without null noise."""

from __future__ import annotations

from typing import Any


def tidy_schema(schema: dict[str, Any]) -> None:
    """``anyOf: [X, {"type": "null"}]`` → X, and no ``"default": null`` (in place)."""
    for prop in schema.get("properties", {}).values():
        any_of = prop.get("anyOf")
        if isinstance(any_of, list):
            rest = [s for s in any_of if s != {"type": "null"}]
            if len(rest) == 1 and len(rest) < len(any_of):
                del prop["anyOf"]
                prop.update(rest[0])
        if "default" in prop and prop["default"] is None:
            del prop["default"]
