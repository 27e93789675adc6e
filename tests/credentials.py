"""The settings that would send a test's model requests to a real endpoint with a real key: the
one list the test folders that drive the real SDK (tests/runtime, tests/drafts) remove."""

from __future__ import annotations

import pytest

API_SETTINGS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
)


def scrub_api_settings(monkeypatch: pytest.MonkeyPatch, *more: str) -> None:
    """Remove :data:`API_SETTINGS` (and ``more``) from this test's environment."""
    for name in (*API_SETTINGS, *more):
        monkeypatch.delenv(name, raising=False)
