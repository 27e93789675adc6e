"""bin/journal-agent-launch (and -setup): the plugin runs journal-agent without a separate
install step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.capture.hook_helpers import run_hook

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "bin" / "journal-agent-launch"
VENV_BIN = Path(sys.executable).parent


def _path_with(tmp_path: Path, **links: Path) -> str:
    """A PATH of one folder holding only ``links`` (name → target), then the system's."""
    folder = tmp_path / "path-bin"
    folder.mkdir(exist_ok=True)
    for name, target in links.items():
        # A script, not a symlink: a venv's python is only that venv's when run by its path.
        script = folder / name.replace("_", "-")
        script.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
        script.chmod(0o755)
    return os.pathsep.join([str(folder), "/usr/bin", "/bin"])


def _launch(*args: str, path: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(data.parent), "CLAUDE_PLUGIN_DATA": str(data)}
    return subprocess.run(
        [str(LAUNCHER), *args],
        env=env,
        cwd=data.parent,  # not the repository: its journal_agent/ must not count as installed
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_runs_the_journal_agent_on_path(tmp_path):
    path = _path_with(tmp_path, journal_agent=VENV_BIN / "journal-agent")
    done = _launch("--version", path=path, data=tmp_path / "data")
    assert done.returncode == 0 and done.stdout.startswith("journal-agent 0.")


def test_without_the_script_it_runs_a_python_that_has_the_package(tmp_path):
    path = _path_with(tmp_path, python3=Path(sys.executable))
    done = _launch("--version", path=path, data=tmp_path / "data")
    assert done.returncode == 0 and done.stdout.startswith("journal-agent 0."), done.stderr
    assert _launch("--status", path=path, data=tmp_path / "data").stdout == ""


def test_with_nothing_installed_it_prepares_in_the_background_and_says_so(tmp_path):
    """No journal-agent anywhere: one sentence, and a detached child preparing the private
    environment (here it fails at once — its venv path is taken — so nothing is downloaded);
    after that the sentence says what to run instead."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "venv").write_text("not a directory")
    path = _path_with(tmp_path, python3=Path("/usr/bin/python3"))

    done = _launch("mcp", path=path, data=data)
    assert done.returncode == 1
    assert done.stderr.startswith("journal-agent: its tools are being installed into the plugin")
    for _ in range(600):
        if (data / "prepare.failed").exists():
            break
        time.sleep(0.1)
    log = (data / "prepare.log").read_text()
    # The python3 on PATH (/usr/bin's, without torch: a plain venv) made the venv, and failed.
    assert f" preparing\n$ {tmp_path}/path-bin/python3 -m venv {data}/venv\n" in log
    status = _launch("--status", path=path, data=data).stdout
    assert "preparing the plugin's environment failed" in status
    assert "`pip install journal-agent`" in status


def test_session_start_says_what_to_run_until_it_is_ready(tmp_path, project):
    data = tmp_path / "data"
    data.mkdir()
    (data / "prepare.failed").write_text("see the log\n")
    env = {
        "CLAUDE_PLUGIN_DATA": str(data),
        "CLAUDE_PLUGIN_ROOT": str(REPO),
        "PATH": _path_with(tmp_path, python3=Path("/usr/bin/python3")),
    }
    payload = {"session_id": "s1", "source": "startup"}
    line = run_hook("SessionStart", payload, project, env=env).stdout.decode()
    assert line.startswith("journal-agent: its tools are unavailable — preparing")
    assert line.count("\n") == 1

    (data / "venv").mkdir()
    (data / "venv" / ".journal-agent-ready").touch()
    assert run_hook("SessionStart", payload, project, env=env).stdout == b""


def test_the_mcp_server_of_the_plugin_goes_through_the_launcher():
    servers = json.loads((REPO / ".mcp.json").read_text())
    assert servers["journal"]["command"] == "${CLAUDE_PLUGIN_ROOT}/bin/journal-agent-launch"
    assert os.access(LAUNCHER, os.X_OK)
