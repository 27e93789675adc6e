"""Which files the sandbox hides: secret-looking names in the workspace, the usual
credential stores in the home directory, and whatever a ``Read(...)`` deny rule or
``sandbox.filesystem.denyRead`` names.

The workspace is walked at every call (a ``.env`` created a minute ago is hidden at the next
command), but a directory whose modification time has not changed is not listed again: its
mtime changes exactly when a name inside it is added, removed or renamed, which is all that
matters here. The cost of an unchanged tree is one ``stat`` per directory.

The same walk notes the directories that hold a ``.git`` (nested repositories, submodule and
worktree checkouts), for :mod:`._gitdirs`; it does not go into ``.git`` itself.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

# Relative to the home directory: where credentials usually live.
HOME_SECRETS = (
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".netrc",
    ".gnupg",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".docker/config.json",
    ".kube/config",
    ".azure",
    ".claude/.credentials.json",
    ".config/gh/hosts.yml",
)
# Never walked: version control internals and caches, large and never secret by name.
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".ruff_cache"}
MAX_ENTRIES = 200_000  # a walk that would exceed this stops (and says so in the view)


@dataclass
class _Dir:
    mtime_ns: int
    secrets: list[str]  # names of secret-looking files and directories in it
    subdirs: list[str]  # names of real (not symlinked) subdirectories
    git: bool = False  # holds a ``.git`` (of any kind: directory, gitfile, symlink)


@dataclass
class SecretScan:
    """The secret-looking paths of one workspace, kept current between calls."""

    root: Path
    name_re: re.Pattern[str]
    _cache: dict[str, _Dir] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    truncated: bool = False
    repos: list[Path] = field(default_factory=list)  # directories holding a .git, last walk

    def paths(self) -> list[Path]:
        with self._lock:
            out: list[Path] = []
            repos: list[Path] = []
            seen = 0
            self.truncated = False
            stack = [str(self.root)]
            live: set[str] = set()
            while stack:
                d = stack.pop()
                live.add(d)
                entry = self._entry(d)
                if entry is None:
                    continue
                seen += len(entry.subdirs) + len(entry.secrets)
                if seen > MAX_ENTRIES:
                    self.truncated = True
                    break
                out.extend(Path(d, name) for name in entry.secrets)
                if entry.git:
                    repos.append(Path(d))
                stack.extend(os.path.join(d, name) for name in entry.subdirs)
            for gone in set(self._cache) - live:
                del self._cache[gone]
            self.repos = repos
            return out

    def _entry(self, d: str) -> _Dir | None:
        try:
            mtime = os.stat(d).st_mtime_ns
        except OSError:
            return None
        cached = self._cache.get(d)
        if cached is not None and cached.mtime_ns == mtime:
            return cached
        secrets, subdirs = [], []
        git = False
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.name == ".git":
                        git = True
                    elif self.name_re.fullmatch(e.name):
                        secrets.append(e.name)
                    elif e.name not in SKIP_DIRS and e.is_dir(follow_symlinks=False):
                        subdirs.append(e.name)
        except OSError:
            return None
        entry = _Dir(mtime, secrets, subdirs, git)
        self._cache[d] = entry
        return entry


def name_regex(patterns: tuple[str, ...], exceptions: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for the names (not paths) that look like secrets, minus the exceptions."""
    from journal_agent.tools._pathrules import translate_glob

    names = [p for p in patterns if "/" not in p]
    allowed = "|".join(re.escape(e) for e in exceptions)
    body = "|".join(translate_glob(p) for p in names)
    # Case-insensitive, as the file tools' check: `.ENV` is a secret too.
    return re.compile(rf"(?!(?:{allowed}|.*\.pub)$)(?:{body})", re.DOTALL | re.IGNORECASE)


def home_secrets(home: Path) -> list[Path]:
    return [home / rel for rel in HOME_SECRETS if os.path.lexists(home / rel)]
