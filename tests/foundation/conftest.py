from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user home with no ~/.claude, so the developer's own definitions never leak in."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _run_cli(
    *args: str,
    cwd: Path,
    home: Path | None = None,
    env: dict | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The real command line in a real subprocess, as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    if home is not None:
        full_env["HOME"] = str(home)
    full_env.pop("JOURNAL_AGENT_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "journal_agent", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=120,
    )


@pytest.fixture
def write():
    """write(path, text): create a file (and its folders) with UTF-8 text."""
    return _write


@pytest.fixture
def cli():
    """cli(*args, cwd=..., home=...): run ``python -m journal_agent`` in a subprocess."""
    return _run_cli
