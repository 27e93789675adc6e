"""Finding and running the ripgrep binary that the ``ripgrep`` wheel installs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from journal_agent.tools.base import ToolError

# Flags every search shares: .gitignore honoured even outside a git repository, hidden files
# searched (configs like .github/ matter) but never the VCS directory, no colour, no config file.
COMMON_FLAGS = (
    "--no-require-git",
    "--hidden",
    "--glob",
    "!.git",
    "--color",
    "never",
    "--no-config",
)
RG_TIMEOUT_S = 60


@lru_cache(maxsize=1)
def rg_binary() -> str:
    """The path of ``rg``: next to this Python first (the venv's wheel), then on PATH."""
    here = Path(sys.executable).parent / "rg"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("rg")
    if found:
        return found
    raise ToolError(
        "ripgrep (rg) is not installed, so Grep and Glob cannot run; install it with "
        "`pip install ripgrep==14.1.0` in this environment."
    )


def run_rg(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            [rg_binary(), *COMMON_FLAGS, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RG_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(
            f"The search took longer than {RG_TIMEOUT_S} s and was stopped; narrow it with "
            "path, glob or type."
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not run ripgrep: {exc.strerror}.") from None


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def newest_first(paths: list[str], root: Path) -> list[str]:
    """Workspace-relative ``paths`` sorted by modification time, newest first (then by name)."""

    def mtime(rel: str) -> float:
        try:
            return os.stat(os.path.join(root, rel)).st_mtime
        except OSError:
            return 0.0

    return [p for _, p in sorted((-mtime(p), p) for p in paths)]
