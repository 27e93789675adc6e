"""Helpers to run the real Claude Code CLI against a scripted model on 127.0.0.1, on a machine as a
new user has it (no ``journal-agent`` on PATH) with the plugin's environment as a preparation
leaves it. The tests and benchmarks/session_overhead.py share them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journal_agent.testing import CapturedRequest

REPO = Path(__file__).resolve().parents[2]
CLAUDE = shutil.which("claude")
# Claude Code starts the plugin's MCP server as `journal-agent mcp` (.mcp.json), found on PATH.
VENV_BIN = Path(sys.executable).parent


def claude_clis() -> list[tuple[str, str]]:
    """(version, path) of every Claude Code CLI at hand: the one on PATH and those .ci/run
    installs (2.1.197, the oldest we support, in .ci/node; the latest in .ci/node-latest)."""
    found: dict[str, str] = {}
    candidates = [CLAUDE] + [
        str(REPO / ".ci" / d / "node_modules" / ".bin" / "claude") for d in ("node", "node-latest")
    ]
    for path in candidates:
        if not path or not os.access(path, os.X_OK):
            continue
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        version = done.stdout.split(" ")[0].strip()
        if done.returncode == 0 and version:
            found.setdefault(version, path)
    return sorted(found.items())


def user_clone(dest: Path) -> Path:
    """A copy of the plugin as a user's clone holds it: the files git tracks (and new ones it
    does not ignore), without this checkout's .venv, .ci/node* or caches. `claude plugin
    install` copies the whole marketplace directory into the home; from the checkout itself
    that is gigabytes per install (torch in .venv, two Claude Code binaries), which filled
    CI's disk (ENOSPC)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not source.is_file():  # deleted in the work tree but not yet in the index
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return dest


def exec_shim(path: Path, target: str | Path) -> Path:
    """An executable script at ``path`` that runs ``target`` with its arguments: a venv's
    interpreter needs to be started as itself (a link to it is another Python, without the
    venv's packages)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)
    return path


def new_user_path(folder: Path) -> str:
    """A new user's PATH: ``folder``, holding a ``python3`` that is the base interpreter (no
    journal_agent, no torch), then /usr/bin and /bin: no ``journal-agent``, no ``uv``."""
    exec_shim(folder / "python3", getattr(sys, "_base_executable", sys.executable))
    return os.pathsep.join([str(folder), "/usr/bin", "/bin"])


def ready_plugin_env(envs: Path, python: Path, root: Path = REPO) -> Path:
    """The environment of the plugin at ``root`` under ``envs`` (what ``JOURNAL_AGENT_ENVS``
    names) as a preparation leaves it: state.json ready for this pyproject.toml, ``venv/bin``
    whose python is ``python`` and whose journal-agent is this test environment's. Its folder.
    """
    from journal_agent.plugin_env.env import deps_stamp, locate

    before = os.environ.get("JOURNAL_AGENT_ENVS")
    os.environ["JOURNAL_AGENT_ENVS"] = str(envs)
    try:
        env = locate(str(root))
    finally:  # (the process's environment as it was: a later test reads it)
        if before is None:
            del os.environ["JOURNAL_AGENT_ENVS"]
        else:
            os.environ["JOURNAL_AGENT_ENVS"] = before
    home = Path(env.home)
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(python)
    (home / "venv" / "bin" / "journal-agent").symlink_to(VENV_BIN / "journal-agent")
    state = {"phase": "ready", "deps": deps_stamp(str(root)), "python": str(python)}
    (home / "state.json").write_text(json.dumps(state))
    (home / "root.txt").write_text(f"{os.path.realpath(root)}\n")
    return home


needs_claude = pytest.mark.skipif(
    CLAUDE is None,
    reason="Claude Code CLI `claude` not on PATH (npm install -g @anthropic-ai/claude-code)",
)


@dataclass
class ClaudeRun:
    result: dict[str, Any]
    requests: list[CapturedRequest]
    stderr: str

    @property
    def main_requests(self) -> list[CapturedRequest]:
        """Requests of the main conversation (the ones offering the Agent tool)."""
        return [r for r in self.requests if "Agent" in tool_names(r)]


def tool_names(request: CapturedRequest) -> list[str]:
    return [t["name"] for t in request.body.get("tools", [])]


def texts(request: CapturedRequest, role: str | None = None) -> list[str]:
    """Every text the request carries in its messages (optionally of one role)."""
    out: list[str] = []
    for message in request.body.get("messages", []):
        if role and message["role"] != role:
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                out.append(block["text"])
    return out


def tool_results(request: CapturedRequest) -> dict[str, str]:
    """tool_use name → the text of its tool_result, over the whole conversation so far."""
    names: dict[str, str] = {}
    results: dict[str, str] = {}
    for message in request.body.get("messages", []):
        if not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                content = block["content"]
                if isinstance(content, list):
                    content = "\n".join(c.get("text", "") for c in content)
                results[names.get(block["tool_use_id"], "?")] = content
    return results


def called(body: dict[str, Any]) -> list[str]:
    """Names of the tools the (scripted) model already called in this conversation."""
    return [
        block["name"]
        for message in body.get("messages", [])
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def claude_env(home: Path, base_url: str | None = None) -> dict[str, str]:
    """A minimal environment: a throw-away HOME, our venv first on PATH, no real credentials."""
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        "LANG": "C.UTF-8",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # Claude Code gives an MCP server 30 s to connect by default; with the suite running in
        # parallel on two busy cores our server (a Python start plus imports) can take longer.
        "MCP_TIMEOUT": "120000",
    }
    if base_url:
        env |= {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted-0000"}
    return env


def run_claude(
    args: list[str],
    *,
    cwd: Path,
    home: Path,
    base_url: str | None = None,
    timeout: float = 40,
    binary: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    binary = binary or CLAUDE
    assert binary is not None
    return subprocess.run(
        [binary, *args],
        cwd=cwd,
        env={**claude_env(home, base_url), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
