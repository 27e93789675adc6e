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

- ``core.worktree`` only where ``git submodule`` puts it: in a git directory, leading to a
  checkout whose ``.git`` leads back to that git directory.
- a linked worktree's ``commondir`` naming the repository that holds its ``worktrees/``, and
  its ``gitdir`` naming a gitfile that leads back (what ``git worktree add`` writes).

The file is parsed by git itself (``git config --file F --list -z --no-includes``), which
reads it without acting on any of it; whatever git cannot parse is refused.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from journal_agent.tools.sandbox._git import run_git
from journal_agent.tools.sandbox._gitdirs import first_line, pointer, resolve

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


def leads_back(dot_git: Path, gitdir: Path, roots: tuple[Path, ...] = ()) -> bool:
    """``dot_git`` is a gitfile whose ``gitdir:`` is ``gitdir``. With ``roots``, a
    ``dot_git`` whose directory lies outside them is not looked at (and so not harmless)."""
    if roots and not _inside(_real(dot_git.parent), roots):
        return False
    found = pointer(dot_git)
    return found is not None and found.kind == "gitfile" and resolve(dot_git) == _real(gitdir)


def harmless_commondir(commondir: Path) -> bool:
    """A linked worktree's ``commondir``, naming the repository that holds it
    (``<repo>/worktrees/<name>/commondir`` → ``<repo>``)."""
    admin = commondir.parent
    target = first_line(commondir)
    return (
        target is not None
        and admin.parent.name == "worktrees"
        and _real(admin / target) == _real(admin.parent.parent)
    )


def harmless_gitdir(gitdir_file: Path, roots: tuple[Path, ...] = ()) -> bool:
    """A linked worktree's ``gitdir``, naming the worktree's gitfile that leads back."""
    target = first_line(gitdir_file)
    admin = gitdir_file.parent
    return target is not None and leads_back(admin / target, admin, roots)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def unsafe_config_keys(
    config: Path, gitdir: Path | None = None, roots: tuple[Path, ...] = ()
) -> list[str]:
    """The keys of ``config`` that git does not write on its own (``[]``: all harmless).
    ``gitdir``: the git directory holding it, where ``git submodule`` sets core.worktree;
    ``roots``: where the checkout core.worktree names may be looked at."""
    try:
        if not stat.S_ISREG(os.lstat(config).st_mode):
            return ["(not a regular file)"]
    except OSError:
        return ["(unreadable)"]
    done = run_git(
        "config", "--file", str(config), "--list", "-z", "--no-includes",
        cwd="/", timeout=_TIMEOUT_S, no_global=True,
    )  # fmt: skip
    if done is None:
        return ["(git could not read it)"]
    if done.returncode != 0:
        return ["(not a config file git can parse)"]
    bad: list[str] = []
    for item in done.stdout.decode("utf-8", "replace").split("\0"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        if key == "core.worktree" and gitdir is not None:
            if not leads_back(gitdir / value / ".git", gitdir, roots):
                bad.append(key)
        elif not _SAFE_KEY.fullmatch(key) or (_URL_KEY.fullmatch(key) and _unsafe_url(value)):
            bad.append(key)
    return list(dict.fromkeys(bad))


def _unsafe_url(url: str) -> bool:
    return "::" in url or url.lstrip().startswith("-")
