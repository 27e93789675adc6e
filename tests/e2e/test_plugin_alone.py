"""`claude plugin install` is all a user needs: with no `journal-agent` on PATH, the plugin's
launcher (bin/journal-agent-launch) runs the MCP server, or says at SessionStart what is
happening — in the real Claude Code CLI, 2.1.197 and the latest, with a fresh home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from journal_agent.testing import ScriptedModel, reply
from tests.e2e.claude_helpers import claude_clis, run_claude, texts, tool_results
from tests.e2e.test_claude_code import ESTIMATE, _estimate_flow

CLIS = claude_clis()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CLIS, reason="no Claude Code CLI (.ci/run installs two)"),
]


@pytest.fixture(params=CLIS, ids=[version for version, _ in CLIS])
def cli(request) -> tuple[str, str]:
    """(version, path) of a Claude Code CLI."""
    return request.param


def _user_machine(tmp_path: Path, python: str) -> tuple[Path, Path, dict[str, str]]:
    """A fresh home with the plugin installed from its marketplace, and a PATH whose only
    `python3` is ``python`` and which holds no `journal-agent`."""
    home, project, folder = tmp_path / "home", tmp_path / "project", tmp_path / "bin"
    for d in (home, project, folder):
        d.mkdir()
    (folder / "python3").write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    (folder / "python3").chmod(0o755)
    env = {"PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"])}
    return home, Path(os.path.realpath(project)), env


def _install(binary: str, home: Path, project: Path, env: dict[str, str], clone: Path) -> None:
    for args in (["marketplace", "add", str(clone)], ["install", "journal-agent@journal-agent"]):
        # Claude Code copies the whole marketplace directory into the home.
        done = run_claude(
            ["plugin", *args], cwd=project, home=home, binary=binary, env=env, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_installed_plugin_runs_its_mcp_tools_without_journal_agent_on_path(
    cli, tmp_path, plugin_clone
):
    version, cli_binary = cli
    home, project, env = _user_machine(tmp_path, sys.executable)  # a Python with the package
    _install(cli_binary, home, project, env, plugin_clone)
    # Claude Code starts every server for its health check: ours, through the launcher.
    listed = run_claude(["mcp", "list"], cwd=project, home=home, binary=cli_binary, env=env)
    assert "bin/journal-agent-launch mcp - ✔ Connected" in listed.stdout, listed.stdout
    if version != "2.1.197":
        return  # later versions defer MCP tools behind a tool search the script does not drive
    model = ScriptedModel([_estimate_flow] * 40)
    with model.serve() as url:
        done = run_claude(
            [
                *("-p", "Estimate llama-7b memory.", "--output-format", "json"),
                *("--allowedTools", ESTIMATE),
            ],
            cwd=project,
            home=home,
            base_url=url,
            binary=cli_binary,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    main = [r for r in model.requests if "Agent" in [t["name"] for t in r.body.get("tools", [])]]
    assert "[m:est-" in tool_results(main[-1])[ESTIMATE]
    assert list((project / ".journal" / "measurements").glob("est-*.json"))


def test_with_nothing_installed_session_start_says_what_is_happening(cli, tmp_path, plugin_clone):
    cli_binary = cli[1]
    home, project, env = _user_machine(tmp_path, "/usr/bin/python3")  # no journal_agent there
    _install(cli_binary, home, project, env, plugin_clone)
    data = next((home / ".claude" / "plugins" / "data").glob("journal-agent*"), None)
    if data is None:  # created by Claude Code before the first hook runs
        data = home / ".claude" / "plugins" / "data" / "journal-agent-journal-agent"
    data.mkdir(parents=True, exist_ok=True)
    (data / "prepare.failed").write_text("a failed attempt: nothing is downloaded in a test\n")
    every = _say_hi(cli_binary, home, project, env)
    assert "journal-agent: its tools are unavailable — preparing the plugin's environment" in every
    assert "`pip install journal-agent`" in every


def _python_with_torch_but_not_the_package(tmp_path: Path) -> Path:
    """A user's `python3`: a venv of the base interpreter that has torch (and our other
    dependencies, lent by a .pth from the test's own environment) but not journal_agent."""
    folder = tmp_path / "user-python"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=300)
    ours = sysconfig.get_paths()["purelib"]  # this environment's site-packages: torch is there
    [site] = (folder / "lib").glob("python3*/site-packages")
    (site / "torch-of-the-user.pth").write_text(ours + "\n")
    python = folder / "bin" / "python3"
    # (At most a namespace package: the wheel's plugin files lie in site-packages/journal_agent.)
    probe = (
        "import torch, importlib.util as u; "
        "print(getattr(u.find_spec('journal_agent'), 'origin', None))"
    )
    found = subprocess.run([python, "-P", "-c", probe], capture_output=True, text=True, timeout=300)
    assert (found.returncode, found.stdout) == (0, "None\n"), found.stderr
    return python


def test_the_plugin_prepares_its_own_environment_reusing_torch_and_then_runs_from_it(
    tmp_path, plugin_clone
):
    """The whole first-use path, as a user meets it: no `journal-agent` anywhere, a `python3`
    with torch. The first session is told the tools are being installed; meanwhile the plugin's
    launcher builds `${CLAUDE_PLUGIN_DATA}/venv` in the background (pip from the registry, the
    plugin's own copy of the package, torch lent rather than downloaded); the next session's
    MCP server runs from that venv, and SessionStart says nothing any more. On the oldest CLI
    only: the launcher is ours, and the build takes minutes."""
    cli_binary = CLIS[0][1]
    python = _python_with_torch_but_not_the_package(tmp_path)
    home, project, env = _user_machine(tmp_path, str(python))
    _install(cli_binary, home, project, env, plugin_clone)
    told = "journal-agent: its tools are being installed into the plugin's own environment"

    first = _say_hi(cli_binary, home, project, env)
    assert told in first
    assert "`claude --continue` resumes this one with them once the log ends in 'ready'" in first
    data = next((home / ".claude" / "plugins" / "data").glob("journal-agent*"))
    ready, failed = data / "venv" / ".journal-agent-ready", data / "prepare.failed"
    log_file = data / "prepare.log"

    def finished() -> bool:  # what the sentence tells the user to watch for
        return failed.exists() or (log_file.exists() and log_file.read_text().endswith("ready\n"))

    deadline = time.monotonic() + 1200
    while not finished() and time.monotonic() < deadline:
        time.sleep(1)
    log = log_file.read_text()
    assert ready.exists(), log
    # torch came from the user's Python: lent by a .pth, not installed into the venv again.
    assert f"(torch lent from {sysconfig.get_paths()['purelib']})" in log
    assert not list((data / "venv").glob("lib/python3*/site-packages/torch"))
    private = data / "venv" / "bin" / "python"
    origin = subprocess.run(
        [private, "-P", "-c", "import journal_agent, torch; print(journal_agent.__file__)"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert origin.stdout.startswith(str(data / "venv")), origin.stdout + origin.stderr

    listed = run_claude(["mcp", "list"], cwd=project, home=home, binary=cli_binary, env=env)
    assert "bin/journal-agent-launch mcp - ✔ Connected" in listed.stdout, listed.stdout
    assert "journal-agent: its tools" not in _say_hi(cli_binary, home, project, env)


def _say_hi(cli_binary: str, home: Path, project: Path, env: dict[str, str]) -> str:
    """Every text the model was sent in a one-prompt session."""
    model = ScriptedModel([lambda body: reply("Hello.")] * 40)
    with model.serve() as url:
        done = run_claude(
            ["-p", "hi", "--output-format", "json"],
            cwd=project,
            home=home,
            base_url=url,
            binary=cli_binary,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["result"] == "Hello."
    return "\n".join(t for r in model.requests for t in texts(r))
