"""The repository root is a Claude Code plugin, and the wheel carries the same definitions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_manifests_follow_claude_code_rules():
    plugin = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    assert plugin["name"] == "journal-agent"
    for field in (
        "version",
        "description",
        "author",
        "homepage",
        "repository",
        "license",
        "keywords",
    ):
        assert plugin[field], field
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    assert market["owner"]["name"]
    assert {"name": "journal-agent", "source": "./"}.items() <= market["plugins"][0].items()
    servers = json.loads((REPO / ".mcp.json").read_text())
    # The MCP front of the launcher answers at once and prepares the environment (docs/plugin.md).
    assert servers["journal"]["command"] == "${CLAUDE_PLUGIN_ROOT}/bin/journal-agent"
    assert servers["journal"]["args"] == ["mcp"]
    from journal_agent import __version__

    assert plugin["version"] == __version__


@pytest.mark.skipif(shutil.which("claude") is None, reason="Claude Code CLI not installed")
@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"])
def test_claude_code_validator_accepts_the_plugin(target, tmp_path):
    done = subprocess.run(
        ["claude", "plugin", "validate", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={"HOME": str(tmp_path), "PATH": __import__("os").environ["PATH"]},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout


@pytest.mark.slow
def test_wheel_ships_the_definitions(tmp_path):
    """A non-editable install finds agents/ and commands/ as package data."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(wheels.glob("journal_agent-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (
        "agents/learning-journal.md",
        "agents/training-optimization.md",
        "commands/learn.md",
        "commands/end-session.md",
        ".claude-plugin/plugin.json",
    ):
        assert f"journal_agent/_plugin/{rel}" in names
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import json, pathlib; from journal_agent.definitions import discover_agents, "
        "discover_commands; from journal_agent.paths import plugin_root; "
        "r = pathlib.Path('.'); print(json.dumps([str(plugin_root()), "
        "sorted(discover_agents(r).found), sorted(discover_commands(r).found)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "HOME": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    root, agents, commands = json.loads(done.stdout)
    assert root.startswith(str(target))
    assert agents == ["learning-journal", "training-optimization"]
    assert {"learn", "end-session"} <= set(commands)
