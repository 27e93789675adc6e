"""The ``sandbox`` section of settings.json, in Claude Code's shape.

.. code-block:: json

    {"sandbox": {
        "enabled": true,
        "filesystem": {"allowWrite": ["~/.cache/pip"], "denyRead": ["./data/private/**"],
                       "denyWrite": ["./vendor"]},
        "network": {"allowedDomains": ["*"]},
        "env": ["WANDB_MODE", "HF_HUB_*"],
        "limits": {"processes": 1024, "memory": "16G", "fileSize": "8G", "tmp": "2G"}}}

Unlike Claude Code, the sandbox is on unless a settings file says ``"enabled": false``: every
Bash command runs in it. Paths follow the rule syntax of ``Read(...)`` (``//abs``, ``~/x``,
``./x`` or ``x/y`` relative to the workspace, a bare ``*.pem`` at any depth).

Network: off, unless ``allowedDomains`` holds ``"*"`` (all of it). A list of particular
domains cannot be enforced without a filtering proxy, which we do not run: it leaves the
network off, and the start-up notice says so.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class SandboxFilesystem(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    allow_write: list[str] = Field(default_factory=list, alias="allowWrite")
    deny_read: list[str] = Field(default_factory=list, alias="denyRead")
    deny_write: list[str] = Field(default_factory=list, alias="denyWrite")


class SandboxNetwork(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    allowed_domains: list[str] = Field(default_factory=list, alias="allowedDomains")
    # Without network, every Unix-domain socket bound outside the workspace is unreachable
    # except these (Claude Code's name).
    allow_unix_sockets: list[str] = Field(default_factory=list, alias="allowUnixSockets")

    @property
    def all_allowed(self) -> bool:
        return "*" in self.allowed_domains

    @property
    def unenforceable(self) -> list[str]:
        """Particular domains asked for: not enforced (the network stays off)."""
        return [] if self.all_allowed else list(self.allowed_domains)


_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)i?b?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(value: object) -> int | None:
    """``"8G"``, ``"512M"``, ``1073741824`` → bytes (binary units); None or ``"unlimited"``:
    no limit."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("unlimited", "")):
        return None
    if isinstance(value, bool):
        raise ValueError("give a size such as 8G or 512M, or null for no limit")
    if isinstance(value, int | float):
        return int(value)
    match = _SIZE.fullmatch(str(value))
    if not match:
        raise ValueError(f"cannot read {value!r} as a size; write e.g. 8G or 512M")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class SandboxLimits(BaseModel):
    """Bounds on every sandboxed process tree (see .limits). ``null`` lifts one."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    processes: int | None = Field(default=1024, ge=16)  # tasks (threads count) at once
    # Bytes for the whole tree; "auto": half of this machine's memory.
    memory: int | Literal["auto"] | None = "auto"
    file_size: int | None = Field(default=8 * 2**30, alias="fileSize")  # one file's bytes
    tmp: int | None = Field(default=2 * 2**30)  # each private /tmp, /var/tmp, /dev/shm

    @field_validator("memory", "file_size", "tmp", mode="before")
    @classmethod
    def _size(cls, value: object) -> int | str | None:
        return "auto" if value == "auto" else parse_size(value)

    def memory_bytes(self) -> int | None:
        if self.memory != "auto":
            return self.memory
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        except (ValueError, OSError):
            return None


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    enabled: bool = True
    filesystem: SandboxFilesystem = Field(default_factory=SandboxFilesystem)
    network: SandboxNetwork = Field(default_factory=SandboxNetwork)
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    # Names (``*`` globs) passed through from our environment to commands; everything else
    # but a fixed allow-list is left out (see .environment).
    env: list[str] = Field(default_factory=list)
    # Claude Code's top-level ``env``: variables set for every command (folded in by
    # journal_agent.settings).
    values: dict[str, str] = Field(default_factory=dict, exclude=True)
