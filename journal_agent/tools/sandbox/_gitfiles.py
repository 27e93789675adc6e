"""What ``git init`` (``git clone``, ``git remote add``, ``git branch``) leaves in a new
``.git`` that cannot run anything outside the sandbox, so that a command which made a
repository may keep it.

- ``.git/hooks`` holding only ``*.sample`` files: git runs a hook by its exact name
  (``pre-commit``), never ``pre-commit.sample``.
- ``.git/config`` whose every key is one git writes there itself and none names a command.
  Allowed: the repository's format and the file system's quirks (``core.repositoryformatversion``,
  ``core.filemode``, ``core.bare``, ``core.logallrefupdates``, ``core.ignorecase``,
  ``core.precomposeunicode``, ``core.symlinks``, ``extensions.objectformat``,
  ``extensions.refstorage``), ``init.defaultbranch``, a remote's ``url`` and ``fetch`` refspec,
  a branch's ``remote`` and ``merge``. Everything else is refused: ``include``/``includeIf``
  (another file's keys), ``core.fsmonitor``, ``core.hooksPath``, ``core.sshCommand``,
  ``core.pager``, ``core.editor``, ``core.worktree``, aliases, filters, ``diff.*.textconv``,
  ``credential.helper``, ``remote.*.uploadpack``, ``gpg.program`` … A remote URL is refused
  when it picks a remote helper (``ext::sh -c …``, ``fd::``: the ``::`` form) or starts with
  ``-`` (an option to ssh).

The file is parsed by git itself (``git config --file F --list -z --no-includes``), which
reads it without acting on any of it; whatever git cannot parse is refused.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

_SAFE_KEY = re.compile(
    r"core\.(?:repositoryformatversion|filemode|bare|logallrefupdates|ignorecase"
    r"|precomposeunicode|symlinks)"
    r"|extensions\.(?:objectformat|refstorage)"
    r"|init\.defaultbranch"
    r"|remote\..+\.(?:url|fetch)"
    r"|branch\..+\.(?:remote|merge)",
    re.DOTALL,
)
_URL_KEY = re.compile(r"remote\..+\.url", re.DOTALL)
_TIMEOUT_S = 10


def only_sample_hooks(hooks: Path) -> bool:
    """``hooks`` is a real directory holding nothing but regular ``*.sample`` files."""
    try:
        if not stat.S_ISDIR(os.lstat(hooks).st_mode):
            return False
        with os.scandir(hooks) as it:
            return all(e.name.endswith(".sample") and e.is_file(follow_symlinks=False) for e in it)
    except OSError:
        return False


def unsafe_config_keys(config: Path) -> list[str]:
    """The keys of ``config`` that git does not write on its own (``[]``: all harmless)."""
    try:
        if not stat.S_ISREG(os.lstat(config).st_mode):
            return ["(not a regular file)"]
    except OSError:
        return ["(unreadable)"]
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    try:
        done = subprocess.run(
            ["git", "config", "--file", str(config), "--list", "-z", "--no-includes"],
            cwd="/",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ["(git could not read it)"]
    if done.returncode != 0:
        return ["(not a config file git can parse)"]
    bad: list[str] = []
    for item in done.stdout.decode("utf-8", "replace").split("\0"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        if not _SAFE_KEY.fullmatch(key) or (_URL_KEY.fullmatch(key) and _unsafe_url(value)):
            bad.append(key)
    return list(dict.fromkeys(bad))


def _unsafe_url(url: str) -> bool:
    return "::" in url or url.lstrip().startswith("-")
