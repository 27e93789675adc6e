"""Fixtures for the capture tests: a project and a Claude Code transcript beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.capture.hook_helpers import Transcript


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    return Path(os.path.realpath(root))


@pytest.fixture
def transcript(tmp_path: Path, project: Path) -> Transcript:
    return Transcript(tmp_path / "home" / ".claude" / "projects" / "p" / "s1.jsonl", project)
