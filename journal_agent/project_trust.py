"""Trust of a project: which of its own files count only once you approved them, and their state.

A repository is hostile input until you say otherwise: ``git clone`` brings whatever it
committed, and its files would otherwise decide how journal-agent confines the commands a
model runs in it. These count only once approved on your terminal (``journal-agent trust``),
and only as long as they hold exactly what you approved (their SHA-256, kept outside the
workspace by :mod:`journal_agent.trust_store`):

- ``.claude/settings.json`` and ``.journal/settings.json`` (permissions, the sandbox,
  ``capture`` switches such as ``recall_inject`` and ``draft``, the search model);
- ``.claude/settings.local.json``, unless it is yours: Claude Code writes it when you answer
  "always allow" and git never tracks it, so it counts without approval when it is a regular
  file in a real ``.claude`` directory of a git work tree that does not track it (nor has a
  submodule there). Tracked by git (a clone brought it), outside a git work tree (an archive),
  or reached through a symlink: approved like the others;
- the grants of ``.claude/commands/**/*.md`` and ``.claude/agents/**/*.md`` beyond the
  plugin's own file of that name (:mod:`journal_agent.approvals`).

Until then the safe defaults apply — the sandbox on, the default permission mode, no rule of
the file's, recall injection and drafting off — and a run says so in one sentence
(:func:`ignored_notice`). Your own ``~/.claude/settings.json`` and ``~/.claude/`` definition
files are yours and count as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from journal_agent import trust_store

SETTINGS = ".claude/settings.json"
SETTINGS_LOCAL = ".claude/settings.local.json"
OUR_SETTINGS = ".journal/settings.json"
SETTINGS_FILES = (SETTINGS, SETTINGS_LOCAL, OUR_SETTINGS)
DEFINITION_DIRS = (".claude/commands", ".claude/agents")
_MAX_DEFINITIONS = 1000
_GIT_TIMEOUT_S = 10.0

State = Literal["approved", "changed", "not approved", "yours", "unreadable"]


@dataclass(frozen=True)
class ProjectFile:
    rel: str  # its path in the project, with "/"
    sha256: str | None  # None: not a regular file of at most 1 MiB
    state: State


def settings_bytes(root: Path, rel: str) -> tuple[bytes | None, bool]:
    """(the bytes of the project's settings file ``rel`` if they count, whether the file
    exists and is ignored for want of an approval)."""
    path = root / rel
    if not os.path.lexists(path):
        return None, False
    data = trust_store.read_file(path)
    if data is None:
        return None, True
    if rel == SETTINGS_LOCAL and settings_local_is_yours(root):
        return data, False
    if trust_store.is_approved(root, rel, trust_store.digest(data)):
        return data, False
    return None, True


def settings_local_is_yours(root: Path) -> bool:
    """``.claude/settings.local.json`` was written here (by Claude Code, or you), not brought
    by a clone: a regular file in a real ``.claude`` directory, in a git work tree whose index
    tracks neither it nor a submodule at ``.claude``."""
    claude, path = root / ".claude", root / SETTINGS_LOCAL
    try:
        if os.path.islink(claude) or os.path.islink(path) or not path.is_file():
            return False
        index = _git_index(root)
        if index is None:
            return False
        return _untracked(str(root), index, os.stat(path).st_mtime_ns)
    except OSError:
        return False


def _git_index(root: Path) -> tuple[str, int, int] | None:
    """The git index that decides for ``root`` (path, size, mtime), or None outside a work
    tree. ``.git`` may be a directory or a gitfile; git itself is asked which tracks what."""
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if os.path.lexists(dot):
            break
    else:
        return None
    target = dot / "index" if dot.is_dir() else dot
    try:
        st = os.stat(target)
    except OSError:
        return (str(target), -1, -1)  # a new repository without an index: git still answers
    return (str(target), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=32)
def _untracked(root: str, index: tuple[str, int, int], file_mtime: int) -> bool:
    """Asked of git once per state of the index and the file (the cache key)."""
    from journal_agent.gitcmd import run_git

    del index, file_mtime  # only the cache key
    inside = run_git("rev-parse", "--is-inside-work-tree", cwd=root, timeout=_GIT_TIMEOUT_S)
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != b"true":
        return False
    listed = run_git("ls-files", "-z", "--stage", "--", ".claude", cwd=root,
                     timeout=_GIT_TIMEOUT_S)  # fmt: skip
    if listed is None or listed.returncode != 0:
        return False
    for item in listed.stdout.split(b"\0"):
        meta, _, name = item.partition(b"\t")
        if name in (b".claude", SETTINGS_LOCAL.encode()) or meta.startswith(b"160000"):
            return False  # tracked, or .claude is a submodule whose files git does not list
    return True


def definition_files(root: Path) -> list[str]:
    """The project's command and agent files (``.claude/commands/**/*.md``, …), bounded."""
    out: list[str] = []
    for rel in DEFINITION_DIRS:
        base = root / rel
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.rglob("*.md")):
            out.append(path.relative_to(root).as_posix())
            if len(out) >= _MAX_DEFINITIONS:
                return out
    return out


def project_files(root: Path) -> list[ProjectFile]:
    """Every file of the project that counts only once approved, with its state now."""
    approved = trust_store.approvals(root)
    out: list[ProjectFile] = []
    for rel in (*SETTINGS_FILES, *definition_files(root)):
        if not os.path.lexists(root / rel):
            continue
        data = trust_store.read_file(root / rel)
        if data is None:
            out.append(ProjectFile(rel, None, "unreadable"))
            continue
        sha = trust_store.digest(data)
        if rel == SETTINGS_LOCAL and settings_local_is_yours(root):
            state: State = "yours"
        elif approved.get(rel) == sha:
            state = "approved"
        else:
            state = "changed" if rel in approved else "not approved"
        out.append(ProjectFile(rel, sha, state))
    return out


def ignored_notice(ignored: list[str]) -> str | None:
    """The one sentence a run says when settings files of the project were ignored."""
    if not ignored:
        return None
    names = " and ".join([", ".join(ignored[:-1]), ignored[-1]] if len(ignored) > 1 else ignored)
    them = "them" if len(ignored) > 1 else "it"
    return (
        f"note: journal-agent ignores this project's {names} until you approve {them} (so the "
        f"sandbox stays on, the permission mode is default, no rule or grant of {them} counts, "
        f"recall injection is off); read {them} and run `journal-agent trust` in your terminal."
    )


def approve_all(root: Path, files: list[ProjectFile]) -> list[ProjectFile]:
    """Ask on the terminal, then record ``files`` (those not approved yet) as approved."""
    from journal_agent.terminal_confirm import confirm

    pending = [f for f in files if f.state in ("not approved", "changed") and f.sha256]
    if not pending:
        return []
    details = [f"  {f.rel}  ({f.state}, sha256 {f.sha256[:12]}…)" for f in pending if f.sha256]
    confirm(
        f"approving {len(pending)} file(s) of {root}",
        [f"journal-agent will take these files of {root} as they are now:", *details],
        f"journal-agent trust --root {root}",
    )
    # Recorded only if each file still holds what was shown: a file changed meanwhile is not.
    now = {f.rel: f.sha256 for f in project_files(root)}
    kept = [f for f in pending if now.get(f.rel) == f.sha256]
    trust_store.record(root, {f.rel: f.sha256 for f in kept}, _kept_with(root, kept))
    return kept


def _kept_with(root: Path, files: list[ProjectFile]) -> dict[str, dict]:
    """The hook switches an approved ``.journal/settings.json`` turns off, remembered with its
    approval: they stay off while a later change of the file waits to be approved."""
    from journal_agent.capture.settings import SETTINGS_REL, switched_off

    for f in files:
        data = trust_store.read_file(root / f.rel) if f.rel == SETTINGS_REL else None
        off = switched_off(data) if data and trust_store.digest(data) == f.sha256 else []
        if off:
            return {f.rel: {"off": off}}
    return {}


def revoke(root: Path) -> None:
    """Forget every approval of ``root`` (narrows: needs no confirmation)."""
    trust_store.record(root, dict.fromkeys(trust_store.approvals(root)))
