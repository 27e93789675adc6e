"""Fixtures for `inbox draft`: a project whose inbox holds a moment the real Stop hook captured,
drafting turned on, and the real SDK against a scripted Messages API."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from journal_agent.capture import read_inbox
from tests.capture.hook_helpers import Transcript, capture_turn
from tests.credentials import scrub_api_settings
from tests.entries import render_entry
from tests.trust_helpers import approve

KEY = "sk-ant-drafts-test-0123456789abcdef"
INSIGHT = "Warm-up length is in steps, not epochs (train.py:8)."


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real endpoint with a real key; no switch from the outside."""
    scrub_api_settings(monkeypatch, "JOURNAL_AGENT_CAPTURE")


def settings(root: Path, **capture: object) -> None:
    path = root / ".journal" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"capture": capture}))
    approve(root, ".journal/settings.json")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with train.py, one moment captured by the Stop hook, drafting on."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    root = Path(os.path.realpath(root))
    transcript = Transcript(tmp_path / "home" / ".claude" / "projects" / "p" / "s1.jsonl", root)
    edit = ("train.py", "line 8", "line 8 = warmup steps")
    capture_turn(root, transcript, "make warm-up 500 steps", edit, INSIGHT)
    assert [m.text for m in read_inbox(root)] == [INSIGHT]
    settings(root, draft=True)
    return root


def entry(title: str = "Warm-up Is Counted in Steps", ref: str = "train.py:8") -> str:
    """An entry that passes every check in ``project`` (its reference resolves)."""
    return render_entry(
        title,
        "2026-11-26",
        context=f"Changing the warm-up in `{ref}`.",
        question="Is warm-up counted in epochs or in steps?",
        intuition=f"The scheduler counts optimizer steps, so warm-up is in steps ({ref}).",
        tags="#warmup #scheduler",
    )
