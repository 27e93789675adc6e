"""The one list of protected paths: what a tool call must not change without the user's say,
because something *outside* the sandbox acts on it later (Claude Code, git, journal-agent).

===============================  ==============================================================
path                             why
===============================  ==============================================================
``.claude/**``                   Claude Code's (and our) settings, hooks, agents and commands
``.claude-plugin/**``            a plugin Claude Code would load (hooks, MCP servers)
``.mcp.json``                    MCP servers Claude Code starts
``.journal/**`` but ``drafts/``  our settings, the feedback history, the quarantine, approvals
``.git`` (of any repository)     a gitfile or symlink picks the repository git uses
``config``, ``config.worktree``, in every git directory (``.git/``, ``.git/modules/*``,
``hooks``, ``commondir``,        ``.git/worktrees/*``, nested repositories, a ``.git`` symlink's
``gitdir``                       target, a ``commondir``'s target): what git runs or where it
                                 writes
journal-agent's own package      when it lies inside the workspace (a development checkout)
``sandbox.filesystem.denyWrite`` the user's own list
===============================  ==============================================================

Three consumers, one list:

- the sandbox (:func:`journal_agent.tools.sandbox.view.build_view`) mounts
  :func:`protected_paths` read-only for Bash and guards the absent ones;
- the quarantine (:mod:`journal_agent.tools.sandbox.guard`) says :func:`reason` when it moves
  one a command created;
- Write and Edit (:mod:`journal_agent.tools.permissions`) ask before changing a path
  :func:`why_protected` names, even in ``acceptEdits``, unless an allow rule names the path.

``tests/security/test_protected_paths.py`` checks that every path of the list is refused to
all three.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from journal_agent.tools.sandbox._gitdirs import GitDirs
    from journal_agent.tools.sandbox.config import SandboxSettings


@dataclass(frozen=True)
class Entry:
    rel: str  # relative to the workspace root
    why: str  # what acts on it outside the sandbox


ENTRIES: tuple[Entry, ...] = (
    Entry(".claude", "Claude Code reads settings, hooks, agents and commands from it, and runs "
          "the hooks outside the sandbox"),
    Entry(".claude/settings.json", "it changes permission settings"),
    Entry(".claude/settings.local.json", "it changes permission settings"),
    Entry(".claude-plugin", "Claude Code would load it as a plugin, whose hooks and MCP servers "
          "run outside the sandbox"),
    Entry(".mcp.json", "Claude Code would start the MCP servers it lists, outside the sandbox"),
    Entry(".journal", "journal-agent keeps its settings, history, quarantine and approvals in it"),
    Entry(".journal/settings.json", "it changes permission settings"),
    Entry(".journal/history", "`journal-agent feedback --revert` restores command and agent "
          "files from it"),
    Entry(".journal/quarantine", "it holds what earlier commands were not allowed to leave in "
          "place"),
    Entry(".journal/approved-tools.json", "it records which tools you approved for command and "
          "agent files"),
)  # fmt: skip
# Inside a protected path, yet the agent's to write: entry drafts before `journal append`.
WRITABLE_INSIDE = (".journal/drafts",)
# Pre-created (empty) before a writing command, so that they can be kept read-only even before
# they exist: otherwise `mkdir .claude && cp evil.json .claude/settings.local.json` would work.
PRECREATE = (".claude", ".journal", ".journal/drafts")

# In every git directory: config (and config.worktree, read when extensions.worktreeConfig is
# on) can name commands; hooks run; commondir sends git to another directory's config and
# hooks; a worktree's gitdir names where `git worktree repair/prune` write or delete.
GIT_FILES = ("config", "config.worktree", "hooks", "commondir", "gitdir")
GIT_WHY = {
    ".git": "it points git at a repository of the command's choosing, whose config and hooks "
    "git would use outside the sandbox",
    "config": "git runs the commands its config names (core.fsmonitor, aliases, filters) "
    "outside the sandbox",
    "config.worktree": "git runs the commands its config names (core.fsmonitor, aliases, "
    "filters) outside the sandbox",
    "hooks": "git would run the hooks in it outside the sandbox (at a commit, checkout or merge)",
    "commondir": "git would take its config and hooks from the directory it names, outside the "
    "sandbox",
    "gitdir": "`git worktree repair` and `prune` would write to or delete the place it names, "
    "outside the sandbox",
}
PACKAGE_WHY = "it is journal-agent's own code, which runs outside the sandbox"
DENY_WRITE_WHY = "sandbox.filesystem.denyWrite keeps it read-only"


def workspace_paths(root: Path) -> list[Path]:
    """The fixed entries as paths in ``root`` (existing or not), outermost only: what lies
    inside a listed directory is protected with it."""
    listed = [e.rel for e in ENTRIES]
    outer = [r for r in listed if not any(r.startswith(o + "/") for o in listed if o != r)]
    return [root / r for r in outer]


def git_paths(git: GitDirs) -> list[Path]:
    """The files of every git directory found (see :mod:`~.sandbox._gitdirs`) and the gitfiles
    leading to them."""
    files = [g / name for g in sorted(git.dirs) for name in GIT_FILES]
    return files + [p.path for p in git.pointers if p.kind == "gitfile"]


def top_git_paths(root: Path) -> list[Path]:
    """The workspace's own ``.git`` files, guarded even where there is no repository yet."""
    return [root / ".git" / name for name in GIT_FILES]


def package_paths(root: Path) -> list[Path]:
    """journal-agent's own code, when it lies inside the workspace (a development checkout):
    a command must not change what runs outside the sandbox next time."""
    import journal_agent

    package = Path(os.path.realpath(Path(journal_agent.__file__).parent))
    return [package] if root in package.parents else []


def why_protected(
    root: Path,
    path: Path,
    *,
    settings: SandboxSettings | None = None,
    home: Path | None = None,
) -> str | None:
    """Why ``path`` (absolute, resolved) is protected, or None when it is not."""
    root = Path(os.path.realpath(root))
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = None
    if parts:
        why = _entry_why(parts) or _git_why(root, path, parts, settings)
        if why is not None:
            return why
    if any(p == path or p in path.parents for p in package_paths(root)):
        return PACKAGE_WHY
    if settings is not None and _denied_write(root, path, settings, home):
        return DENY_WRITE_WHY
    return None


def reason(root: Path, path: Path, settings: SandboxSettings | None = None) -> str:
    """The sentence the quarantine gives for moving ``path`` aside."""
    return why_protected(root, path, settings=settings) or DENY_WRITE_WHY


def _entry_why(parts: tuple[str, ...]) -> str | None:
    rel = "/".join(parts)
    if any(rel == w or rel.startswith(w + "/") for w in WRITABLE_INSIDE):
        return None
    inside = [e for e in ENTRIES if rel == e.rel or rel.startswith(e.rel + "/")]
    return max(inside, key=lambda e: len(e.rel)).why if inside else None


def _git_why(
    root: Path, path: Path, parts: tuple[str, ...], settings: SandboxSettings | None
) -> str | None:
    if ".git" in parts:
        rest = parts[parts.index(".git") + 1 :]
        if not rest:
            return GIT_WHY[".git"]  # a gitfile or a symlink would pick the repository
        hit = next((p for p in rest if p in GIT_FILES), None)
        return GIT_WHY[hit] if hit is not None else None  # objects, refs, HEAD: git's data
    if not any(p in GIT_FILES for p in parts):
        return None
    # A git directory not named .git: a .git symlink's target, a commondir's, a submodule's.
    dirs = _git_dirs(root, settings)
    for p in (path, *path.parents):
        if p.name in GIT_FILES and p.parent in dirs:
            return GIT_WHY[p.name]
        if p == root:
            break
    return None


def _git_dirs(root: Path, settings: SandboxSettings | None) -> frozenset[Path]:
    from journal_agent.tools.sandbox import _gitdirs
    from journal_agent.tools.sandbox.config import SandboxSettings
    from journal_agent.tools.sandbox.view import dot_gits_of, workspace_scan

    scan = workspace_scan(root, settings or SandboxSettings(), ())
    scan.paths()  # nested repositories as they are now
    return _gitdirs.find(dot_gits_of(root, scan.repos), [root]).dirs


def _denied_write(root: Path, path: Path, settings: SandboxSettings, home: Path | None) -> bool:
    from journal_agent.tools._pathrules import path_matches
    from journal_agent.tools.sandbox.view import anchor

    home = Path(os.path.realpath(home or Path.home()))
    for entry in settings.filesystem.deny_write:
        base, rel = anchor(entry, root, home)
        if path_matches("/" + os.path.join(str(base), rel.rstrip("/")), path, root):
            return True
    return False
