"""Runtime tests: no test may reach a real endpoint with a real key."""

from __future__ import annotations

import pytest

from tests.credentials import scrub_api_settings


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real endpoint with a real key."""
    scrub_api_settings(monkeypatch)
