"""Project settings, read from the files Claude Code users already have plus our own.

Sources, later ones adding to (lists) or overriding (scalars) earlier ones:
``~/.claude/settings.json``, ``<root>/.claude/settings.json``,
``<root>/.claude/settings.local.json``, ``<root>/.journal/settings.json``.

The project's own files count only once you approved them (:mod:`journal_agent.project_trust`):
until then they are left out, :attr:`Settings.ignored` names them, and the safe defaults hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from journal_agent.errors import UserError
from journal_agent.paths import state_dir
from journal_agent.tools.sandbox.config import SandboxSettings


class PermissionSettings(BaseModel):
    """Claude Code's ``permissions`` block: rules like ``Bash(git diff:*)`` or ``Read(./x/**)``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    default_mode: str | None = Field(default=None, alias="defaultMode")


class Settings(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    # Claude Code's shape; see journal_agent/tools/sandbox/config.py and docs/security.md.
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    # Model aliases (haiku/sonnet/opus → model id) and prices live in the runtime's data
    # tables; these override them per project.
    models: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    # Claude Code's ``env``: variables set for every command the model runs.
    env: dict[str, str] = Field(default_factory=dict)

    # The project's settings files left out for want of your approval (paths in the project).
    _ignored: list[str] = PrivateAttr(default_factory=list)

    @property
    def ignored(self) -> list[str]:
        return self._ignored

    @model_validator(mode="after")
    def _env_to_commands(self) -> Settings:
        self.sandbox.values = {**self.env, **self.sandbox.values}
        return self


def settings_files(root: Path, home: Path | None = None) -> list[Path]:
    home = home if home is not None else Path.home()
    return [
        home / ".claude" / "settings.json",
        root / ".claude" / "settings.json",
        root / ".claude" / "settings.local.json",
        state_dir(root) / "settings.json",
    ]


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + [v for v in value if v not in out[key]]
        else:
            out[key] = value
    return out


def load_settings(root: Path, home: Path | None = None) -> Settings:
    """Merge every settings file that counts; a broken one is a clear error, not a crash."""
    from journal_agent.project_trust import settings_bytes

    merged: dict[str, Any] = {}
    ignored: list[str] = []
    files = settings_files(root, home)
    for i, path in enumerate(files):
        if i == 0:  # your own ~/.claude/settings.json
            data = path.read_bytes() if path.is_file() else None
        else:
            rel = path.relative_to(root).as_posix()
            data, left_out = settings_bytes(root, rel)
            if left_out:
                ignored.append(rel)
        if data is not None:
            merged = _merge(merged, _parse(path, data))
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(
            f"settings field '{where}' is invalid ({first['msg']}); fix it in one of "
            f"{', '.join(str(p) for p in files)}."
        ) from exc
    settings._ignored = ignored
    return settings


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path} is not valid JSON ({exc}); fix or remove it and try again."
        ) from exc
    if not isinstance(parsed, dict):
        raise UserError(f"{path} must hold a JSON object; fix or remove it and try again.")
    return parsed
