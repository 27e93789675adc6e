"""Secrets committed to git: the sandbox hides a file, not its history.

``git show HEAD:.env`` reads the object store, which a sandbox cannot hide without breaking
git. What it can do is say so: :func:`secrets_in_history` lists the paths the sandbox masks
in the workspace (the same secret-name patterns) that appear in any commit of any ref, for
``journal-agent doctor``.

git runs on the user's own repository here, as the user would run it, through
:func:`._git.run_git` (nothing that could start a program), and with no external diff or
textconv.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from journal_agent.tools.sandbox._git import run_git
from journal_agent.tools.sandbox._hidden_files import name_regex

_TIMEOUT_S = 60


@dataclass(frozen=True)
class History:
    repository: bool  # False: not in a git repository (or git is missing); nothing to check
    paths: tuple[str, ...] = ()  # masked paths found in history, relative to the workspace
    problem: str = ""  # why the check could not finish ("" when it did)


def secrets_in_history(root: Path, extra_names: tuple[str, ...] = ()) -> History:
    from journal_agent.tools._rules import SECRET_EXCEPTIONS, SECRET_PATTERNS, is_secret_rel

    inside = run_git("rev-parse", "--is-inside-work-tree", cwd=root, timeout=_TIMEOUT_S)
    if inside is None or inside.returncode != 0:
        return History(repository=False)
    names = (*SECRET_PATTERNS, *extra_names)
    pathspecs = [f":(glob)**/{n}{tail}" for n in names for tail in ("", "/**")]
    # -m: a file a merge commit adds (resolving a conflict) is in no other commit's diff.
    done = run_git("log", "--all", "-m", "--format=", "--name-only", "-z", "--no-renames",
                   "--no-textconv", "--no-ext-diff", "--", *pathspecs,
                   cwd=root, timeout=_TIMEOUT_S)  # fmt: skip
    if done is None:
        return History(repository=True, problem=f"git log did not finish within {_TIMEOUT_S} s")
    if done.returncode != 0:
        first = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        return History(repository=True, problem=first[0] if first else "git log failed")
    extra = name_regex(extra_names, SECRET_EXCEPTIONS) if extra_names else None
    found: dict[str, None] = {}
    for path in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        path = path.strip("\n")
        if path and (is_secret_rel(path) or _any_part(extra, path)):
            found[path] = None
    return History(repository=True, paths=tuple(sorted(found)))


def _any_part(regex: re.Pattern[str] | None, path: str) -> bool:
    return regex is not None and any(regex.fullmatch(part) for part in path.split("/"))
