"""Fixtures for the learning tests: a workspace, a home, the CLI in that workspace, the seed."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from tests.learning.learning_helpers import SEED_LEDGER


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return Path(os.path.realpath(root))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def seed_text() -> str:
    return SEED_LEDGER.read_bytes().decode("utf-8")


@pytest.fixture
def cli(cli, ws: Path, home: Path):
    """``cli("ledger", "check")``: the root ``cli`` fixture (in-process) in the workspace, with
    its own HOME; ``cli.terminal("review", script=…)`` the same on a pseudo-terminal."""

    def run(*args: str, stdin: str | None = None, cwd: Path | None = None):
        return cli(*args, cwd=cwd or ws, home=home, input=stdin)

    run.terminal = functools.partial(cli.terminal, cwd=ws, home=home)  # type: ignore[attr-defined]
    return run
