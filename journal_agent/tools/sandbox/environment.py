"""The environment of every process that runs what a model influenced: built from an
allow-list, never the parent's environment minus a few names.

A parent's environment is where people keep cloud keys, tokens and database URLs with their
passwords (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``HF_TOKEN``, ``DATABASE_URL``, …).
A list of names to remove can never be complete, so commands get only what a shell, a
compiler, Python and PyTorch need to work, plus what the user names in settings:

- ``sandbox.env``: names (``*`` globs allowed) passed through from journal-agent's own
  environment, e.g. ``["WANDB_MODE", "HF_HUB_*"]``;
- ``env`` at the top of the settings (Claude Code's): variables set for every command.

Used by the Bash tool and the profiling children (MemoryProfile, MemoryTrace, ``torchrun``
ranks) alike.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from journal_agent.tools.sandbox.config import SandboxSettings

# What a shell, git, compilers, Python and PyTorch read to work as the user expects. Nothing
# here holds a credential by convention; a name that may (a proxy URL with a password, an
# SSH agent's socket) is left out.
ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM",
    "NO_COLOR", "TZ", "TMPDIR", "PWD",
    # where the trust store is (read-only there): `journal-agent commands` shows what is approved
    "XDG_CONFIG_HOME",
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF",
})  # fmt: skip
ALLOWED_PREFIXES = ("LC_",)
# Never wait on a pager or an editor: nobody is at the keyboard.
FIXED = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_EDITOR": "true", "EDITOR": "true"}


def command_env(
    settings: SandboxSettings | None = None,
    *,
    parent: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for one sandboxed (or, without a sandbox, unconfined) process."""
    settings = settings or SandboxSettings()
    parent = os.environ if parent is None else parent
    passed = tuple(settings.env)
    env = {
        k: v
        for k, v in parent.items()
        if k in ALLOWED
        or k.startswith(ALLOWED_PREFIXES)
        or any(fnmatch.fnmatchcase(k, p) for p in passed)
    }
    env.update(settings.values)
    env.update(FIXED)
    # `journal-agent ...` resolves to this installation even when its venv is not activated.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env.setdefault("PATH", os.defpath)
    env.update(extra or {})
    return env
