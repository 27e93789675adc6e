"""The ``sandbox`` section of settings.json, in Claude Code's shape.

.. code-block:: json

    {"sandbox": {
        "enabled": true,
        "filesystem": {"allowWrite": ["~/.cache/pip"], "denyRead": ["./data/private/**"],
                       "denyWrite": ["./vendor"]},
        "network": {"allowedDomains": ["*"]}}}

Unlike Claude Code, the sandbox is on unless a settings file says ``"enabled": false``: every
Bash command runs in it. Paths follow the rule syntax of ``Read(...)`` (``//abs``, ``~/x``,
``./x`` or ``x/y`` relative to the workspace, a bare ``*.pem`` at any depth).

Network: off, unless ``allowedDomains`` holds ``"*"`` (all of it). A list of particular
domains cannot be enforced without a filtering proxy, which we do not run: it leaves the
network off, and the start-up notice says so.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SandboxFilesystem(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    allow_write: list[str] = Field(default_factory=list, alias="allowWrite")
    deny_read: list[str] = Field(default_factory=list, alias="denyRead")
    deny_write: list[str] = Field(default_factory=list, alias="denyWrite")


class SandboxNetwork(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    allowed_domains: list[str] = Field(default_factory=list, alias="allowedDomains")

    @property
    def all_allowed(self) -> bool:
        return "*" in self.allowed_domains

    @property
    def unenforceable(self) -> list[str]:
        """Particular domains asked for: not enforced (the network stays off)."""
        return [] if self.all_allowed else list(self.allowed_domains)


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    enabled: bool = True
    filesystem: SandboxFilesystem = Field(default_factory=SandboxFilesystem)
    network: SandboxNetwork = Field(default_factory=SandboxNetwork)
