"""git run by journal-agent itself, outside the sandbox, on a repository or a file a command may
have written: with nothing that could start a program — no system config, no pager, no
signature checks (``gpg.program``), no fsmonitor, no lazy fetch of a partial clone's missing
objects, no prompt."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_OPTIONS = ("-c", "log.showSignature=false", "-c", "core.fsmonitor=", "--no-pager")
_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def run_git(
    *args: str, cwd: Path | str, timeout: float, no_global: bool = False
) -> subprocess.CompletedProcess[bytes] | None:
    """``git ARGS`` in ``cwd``; None when git is missing or took longer than ``timeout`` s.
    ``no_global``: without the user's ~/.gitconfig too (for a file judged on its own)."""
    env = {**os.environ, **_ENV}
    if no_global:
        env["GIT_CONFIG_GLOBAL"] = os.devnull
    try:
        return subprocess.run(
            ["git", *_OPTIONS, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
