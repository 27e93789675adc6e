"""Fixtures for the Claude Code end-to-end tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from journal_agent.testing import ScriptedModel
from tests.e2e.claude_helpers import REPO, ClaudeRun, run_claude, user_clone


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code gets only the scripted endpoint and a dummy key (see claude_env)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def plugin_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin as a user's clone holds it, to install from a marketplace (see user_clone)."""
    return user_clone(tmp_path_factory.mktemp("clone") / "journal-agent")


@pytest.fixture
def claude_print(tmp_path: Path) -> Iterator[Callable[..., ClaudeRun]]:
    """``claude -p PROMPT --plugin-dir <repo>`` in a fresh project against a scripted model
    (``plugin_dir=False``: rely on a plugin installed in ``run.home``).

    ``respond(body)`` answers every request (stateless: Claude Code also sends side requests,
    such as a session title, in parallel with the main conversation).
    """
    project = tmp_path / "project"
    home = tmp_path / "home"
    project.mkdir()
    home.mkdir()

    def run(
        prompt: str, respond: Callable[[dict[str, Any]], Any], *extra: str, plugin_dir: bool = True
    ) -> ClaudeRun:
        model = ScriptedModel([respond] * 40)
        load = ["--plugin-dir", str(REPO)] if plugin_dir else []
        with model.serve() as url:
            done = run_claude(
                ["-p", prompt, *load, "--output-format", "json", *extra],
                cwd=project,
                home=home,
                base_url=url,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        return ClaudeRun(json.loads(done.stdout), list(model.requests), done.stderr)

    run.project = project  # type: ignore[attr-defined]
    run.home = home  # type: ignore[attr-defined]
    yield run
