"""The one list of protected paths: what a tool call must not change without the user's say,
because something *outside* the sandbox acts on it later (Claude Code, git, journal-agent).

===============================  ==============================================================
path                             why
===============================  ==============================================================
``.claude/**``                   Claude Code's (and our) settings, hooks, agents and commands
``.claude-plugin/**``            a plugin Claude Code would load (hooks, MCP servers)
``.mcp.json``                    MCP servers Claude Code starts
``.journal/**`` but ``drafts/``  our settings, the feedback history, the quarantine
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
- the quarantine (:mod:`journal_agent.tools.sandbox.guard`) gives the reason
  :func:`~journal_agent.tools.sandbox.view.why_protected` gives when it moves one aside;
- Write and Edit (:mod:`journal_agent.tools.permissions`) ask before changing a path
  ``why_protected`` names, even in ``acceptEdits``, unless an allow rule names the path.

This module is the list and the checks that need nothing but the path; the git directories
found on disk and ``denyWrite`` are added by :mod:`journal_agent.tools.sandbox.view`, which
finds them for the sandbox anyway (this module imports nothing of the sandbox).

``tests/security/test_protected_paths.py`` checks that every path of the list is refused to
all three.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from journal_agent.paths import JOURNAL_FILE, LEDGER_FILE


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
    Entry(".journal", "journal-agent keeps its settings, history and quarantine in it"),
    Entry(".journal/settings.json", "it changes permission settings"),
    Entry(".journal/history", "`journal-agent feedback --revert` restores command and agent "
          "files from it"),
    Entry(".journal/quarantine", "it holds what earlier commands were not allowed to leave in "
          "place"),
)  # fmt: skip
# Written by journal-agent's own code only (its tools and commands, which check what goes in;
# journal_agent/foreign_changes.py notices any other hand): read-only for every Bash command in
# every mode, where they exist. Not on the list above: Write and Edit are that code, and a
# missing journal is not quarantined when a command makes one (the next read reports it).
OURS_FOR_BASH = (JOURNAL_FILE, LEDGER_FILE)
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


def top_git_paths(root: Path) -> list[Path]:
    """The workspace's own ``.git`` files, guarded even where there is no repository yet."""
    return [root / ".git" / name for name in GIT_FILES]


def package_paths(root: Path) -> list[Path]:
    """journal-agent's own code, when it lies inside the workspace (a development checkout):
    a command must not change what runs outside the sandbox next time."""
    import journal_agent

    package = Path(os.path.realpath(Path(journal_agent.__file__).parent))
    return [package] if root in package.parents else []


def why_by_name(root: Path, path: Path) -> str | None:
    """Why ``path`` (absolute, resolved) is protected by its name alone — a listed entry, a
    ``.git`` or a git file inside one, the package — or None."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ()
    if parts:
        why = _entry_why(parts)
        if why is None and ".git" in parts:
            rest = parts[parts.index(".git") + 1 :]
            if not rest:
                return GIT_WHY[".git"]  # a gitfile or a symlink would pick the repository
            hit = next((p for p in rest if p in GIT_FILES), None)
            why = GIT_WHY[hit] if hit is not None else None  # objects, refs, HEAD: git's data
        if why is not None:
            return why
    if any(p == path or p in path.parents for p in package_paths(root)):
        return PACKAGE_WHY
    return None


def _entry_why(parts: tuple[str, ...]) -> str | None:
    rel = "/".join(parts)
    if any(rel == w or rel.startswith(w + "/") for w in WRITABLE_INSIDE):
        return None
    inside = [e for e in ENTRIES if rel == e.rel or rel.startswith(e.rel + "/")]
    return max(inside, key=lambda e: len(e.rel)).why if inside else None
