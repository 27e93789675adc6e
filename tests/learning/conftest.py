"""Fixtures for the learning tests: a workspace, a home, the CLI as a subprocess, the seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SEED_LEDGER = FIXTURES / "seed_ledger.md"  # the user's example ledger (seed 002), verbatim

# Tests import their helpers as ``learning_helpers`` (importlib mode does not add this dir).
sys.path.insert(0, str(Path(__file__).parent))


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
def cli(ws: Path, home: Path):
    """``cli("ledger", "check")``: the real command line in the workspace, as a user runs it."""

    def run(*args: str, stdin: str | None = None, cwd: Path | None = None):
        env = {**os.environ, "HOME": str(home)}
        env.pop("JOURNAL_AGENT_ROOT", None)
        return subprocess.run(
            [sys.executable, "-m", "journal_agent", *args],
            cwd=cwd or ws,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run
