"""Shared fixtures for the tool tests: a real workspace directory, a directory outside it
holding a secret, and tool contexts (one per simulated run) over that workspace."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolContext, ToolResult
from journal_agent.tools.edit import Edit
from journal_agent.tools.read import Read
from journal_agent.tools.read_tracking import ReadTracker
from journal_agent.tools.write import Write

SECRET = "TOPSECRET-outside-the-workspace"

FILE_TOOLS = {"Read": Read(), "Write": Write(), "Edit": Edit()}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace root (real path: tmp dirs can sit behind symlinks on some systems)."""
    root = tmp_path / "ws"
    root.mkdir()
    return Path(os.path.realpath(root))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A sibling of the workspace that no tool may touch; holds ``secret.txt``."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET + "\n")
    return Path(os.path.realpath(out))


@pytest.fixture
def make_ctx(ws: Path) -> Callable[..., ToolContext]:
    """A fresh context = a fresh run (its own read tracking) over the workspace."""

    def make(policy: object = None, root: Path | None = None) -> ToolContext:
        return ToolContext(root=root or ws, policy=policy, reads=ReadTracker())

    return make


@pytest.fixture
def ctx(make_ctx: Callable[..., ToolContext]) -> ToolContext:
    return make_ctx()


@pytest.fixture
def call(ctx: ToolContext) -> Callable[..., ToolResult]:
    """``call("Read", file_path=...)``: run a file tool in ``ctx`` as the model would."""

    def run(tool: str, _ctx: ToolContext | None = None, **params: object) -> ToolResult:
        return FILE_TOOLS[tool].call(_ctx or ctx, params)

    return run
