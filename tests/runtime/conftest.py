from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Tests import their helpers as ``runtime_helpers`` (importlib mode does not add this dir).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real endpoint with a real key."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
