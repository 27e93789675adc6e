"""The Bash half of the permission policy: reading a command line for the rules and the
built-in defaults (paths outside the workspace, secrets, privilege), and the allow rule to
suggest. Advisory since the sandbox (:mod:`journal_agent.tools.sandbox`) confines what a
command can do; where no sandbox can start, these checks are the only line and the policy
asks about anything that is not a plain read-only command.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from journal_agent.errors import ToolError
from journal_agent.tools._pathrules import path_matches
from journal_agent.tools._rules import (
    bash_parts,
    bash_pattern_matches,
    is_secret,
    is_secret_rel,
    parse_rule,
)
from journal_agent.tools._shell import (
    PRIVILEGE,
    ShellParseError,
    SimpleCommand,
    candidate_paths,
    cd_target,
    escapes,
    inner_scripts,
    is_read_only,
    is_safe_device,
    recursive_search,
    split_commands,
)


class BashChecks:
    """Mixed into :class:`~journal_agent.tools.permissions.PermissionPolicy`: the checks of a
    Bash command line against ``self.root`` and the rules ``self.allow`` / ``self.deny``."""

    root: Path
    allow: list[str]
    deny: list[str]

    search_filter: Callable[..., Callable[[str], bool] | None]
    _show: Callable[[Path], str]

    def _bash_rule(self, rules: list[str], part: str) -> str | None:
        for rule in rules:
            name, spec = parse_rule(rule)
            if name != "Bash":
                continue
            if spec is None or bash_pattern_matches(spec, part):
                return rule
        return None

    def _flatten(self, parts: list[SimpleCommand], depth: int) -> list[SimpleCommand]:
        """Add the commands inside ``bash -c '...'`` / ``eval`` so they are checked too."""
        out: list[SimpleCommand] = []
        for part in parts:
            out.append(part)
            if depth < 3:
                for script in inner_scripts(part):
                    out.extend(self._flatten(split_commands(script), depth + 1))
        return out

    def _walk_paths(self, parts: list[SimpleCommand]) -> Iterable[tuple[int, str, Path]]:
        """(part index, word, resolved path) for each path-like word.

        A ``cd`` may or may not carry over to later commands (not across ``|`` or ``&``,
        which run in subshells), so each word is resolved against the root *and* every
        directory a ``cd`` so far could have moved to; any resolution may be the real one.
        """
        cwds = [self.root]
        for i, part in enumerate(parts):
            for word in candidate_paths(part):
                if is_safe_device(word):
                    continue
                for cwd in cwds:
                    outside = escapes(word, cwd, self.root)
                    if outside is not None:
                        yield i, word, outside
                    else:
                        yield i, word, Path(os.path.realpath(cwd / os.path.expanduser(word)))
                        # The shell expands `.e*` to `.env`: check what a pattern names too
                        # (not for commands that only look at names and metadata: `ls *`).
                        if os.path.basename(part.name) in _NAMES_ONLY:
                            continue
                        for name, match in _glob_matches(word, cwd):
                            yield i, os.path.relpath(cwd / name, self.root), match
            self._follow_cd(part, cwds)

    def _follow_cd(self, part: SimpleCommand, cwds: list[Path]) -> None:
        """After ``cd DIR``, later commands may run in DIR too (inside the workspace only)."""
        target = cd_target(part)
        if target in (None, "-"):
            return
        for cwd in list(cwds):
            if escapes(target, cwd, self.root) is None:
                new = Path(os.path.realpath(cwd / target))
                if new not in cwds:
                    cwds.append(new)

    def _bash_read_denied(self, parts: list[SimpleCommand]) -> str | None:
        read_denies = [r for r in self.deny if parse_rule(r)[0] == "Read" and parse_rule(r)[1]]
        if not read_denies:
            return None
        for _, word, path in self._walk_paths(parts):
            for rule in read_denies:
                if path_matches(parse_rule(rule)[1] or "", path, self.root):
                    return f"`{word}` is denied by the rule {rule}."
        return None

    def _read_allowed(self, path: Path) -> bool:
        """Whether an allow rule names ``path`` for Read (what lifts the secrets default)."""
        return any(
            parse_rule(r)[0] == "Read"
            and parse_rule(r)[1] is not None
            and path_matches(parse_rule(r)[1] or "", path, self.root)
            for r in self.allow
        )

    def _bash_tree_reads_denied(self, parts: list[SimpleCommand]) -> str | None:
        """A recursive search (``grep -r``, ``rg``) over a tree holding a file Read may not
        show (a secret, a ``Read`` deny rule): which file, or None."""
        visible: Callable[[str], bool] | None = None
        cwds = [self.root]  # as in _walk_paths: every directory a `cd` may have led to
        for part in parts:
            found = recursive_search(part)
            if found is not None:
                flags, operands = found
                dirs: set[str] = set()
                for cwd in cwds:
                    for word in operands or ["."]:
                        if escapes(word, cwd, self.root) is not None:
                            continue  # outside: the workspace default refuses it
                        path = Path(os.path.realpath(cwd / word))
                        if path.is_dir():
                            dirs.add(os.path.relpath(path, self.root))
                if dirs:  # (files named one by one were checked by name already)
                    if visible is None:
                        visible = self.search_filter("Grep")
                    hidden = (  # None from search_filter: every file is visible
                        _first_hidden_file(self.root, flags, sorted(dirs), visible)
                        if visible is not None
                        else None
                    )
                    if hidden is not None:
                        return (
                            f"`{part.text}` would read {hidden}, which looks like a secret or "
                            "is under a Read deny rule. Use the Grep tool, which leaves such "
                            "files out, or search narrower paths."
                        )
            self._follow_cd(part, cwds)
        return None

    def _bash_default_denial(
        self, parts: list[SimpleCommand], allowed_by: list[str | None]
    ) -> str | None:
        """The built-in defaults. An allow rule lifts one only by naming it: ``Bash(sudo
        apt update)`` allows that sudo, ``Bash(cat /etc/hostname)`` that path; a prefix rule
        like ``Bash(git diff:*)`` does not let ``git diff /etc/passwd`` out of the workspace."""

        def named(i: int, word: str) -> bool:
            rule = allowed_by[i]
            spec = parse_rule(rule)[1] if rule else None
            return spec is not None and word in spec

        for i, part in enumerate(parts):
            if part.words and os.path.basename(part.name) in PRIVILEGE and not named(i, part.name):
                return f"`{part.name}` is not allowed: commands run without elevated privileges."
            # `git show HEAD:.env` prints a committed secret as surely as `cat .env`.
            if part.words and os.path.basename(part.name) == "git":
                for word in part.words[1:]:
                    _, colon, spec = word.partition(":")
                    secret = colon and spec and not word.startswith("-") and is_secret_rel(spec)
                    if secret and not named(i, word) and not self._read_allowed(self.root / spec):
                        return (
                            f"`{word}` names {spec}, which looks like a secret (keys, "
                            "credentials, .env) and is not readable by default."
                        )
            # `… | xargs sudo rm`: xargs runs the rest (not unwrapped: its input names files).
            if part.words and os.path.basename(part.name) in ("xargs", "find"):
                escalate = next(
                    (w for w in part.words[1:] if os.path.basename(w) in PRIVILEGE), None
                )
                if escalate is not None and not named(i, escalate):
                    return f"`{escalate}` is not allowed: commands run without elevated privileges."
            if cd_target(part) == "-":
                return "`cd -` goes to an unknown directory; cd to a path inside the workspace."
        for i, word, path in self._walk_paths(parts):
            if named(i, word):
                continue
            if not (path == self.root or self.root in path.parents):
                return (
                    f"`{word}` refers to {path}, outside the workspace {self.root}; commands "
                    f"may only touch files inside it (an allow rule naming this exact command "
                    f"lifts this)."
                )
            if is_secret(path, self.root) and not any(
                parse_rule(r)[0] == "Read"
                and parse_rule(r)[1] is not None
                and path_matches(parse_rule(r)[1] or "", path, self.root)
                for r in self.allow
            ):
                return (
                    f"`{word}` looks like a secret (keys, credentials, .env) and is not readable "
                    f"by default; add an allow rule such as Read(./{self._show(path)}) if needed."
                )
        return None

    def _needing_approval(self, command: str) -> list[str]:
        """The parts of ``command`` that no allow rule covers and that are not read-only:
        the ones a suggested rule must name (not ``ls`` in ``ls && rm x``)."""
        try:
            parts = split_commands(command)
        except ShellParseError:
            return bash_parts(command)
        texts = [
            " ".join([*p.assignments, *p.words])
            for p in parts
            if not is_read_only(p)
            and not self._bash_rule(self.allow, " ".join([*p.assignments, *p.words]))
        ]
        return [t for t in texts if t] or bash_parts(command)


_NAMES_ONLY = {"ls", "stat", "du", "tree", "realpath", "readlink", "basename", "dirname", "test",
               "[", "echo", "printf"}  # fmt: skip
_GLOB_CHARS = re.compile(r"[*?\[]")
_MAX_GLOB_MATCHES = 1000


def _glob_matches(word: str, cwd: Path) -> list[tuple[str, Path]]:
    """The paths the shell would expand ``word`` to (as bash: no dotfiles for ``*``)."""
    if not _GLOB_CHARS.search(word):
        return []
    import glob
    import itertools

    try:
        names = itertools.islice(glob.iglob(word, root_dir=cwd), _MAX_GLOB_MATCHES)
        return [(name, Path(os.path.realpath(cwd / name))) for name in names]
    except (OSError, ValueError):
        return []


def _first_hidden_file(
    root: Path, flags: list[str], dirs: list[str], visible: Callable[[str], bool]
) -> str | None:
    """The first file a recursive search of ``dirs`` would read that ``visible`` rejects."""
    from journal_agent.tools._rg import run_rg

    try:
        proc = run_rg(["--files", "--null", *flags, "--", *dirs], root)
    except ToolError:
        return None  # no rg: the other checks still stand
    for raw in proc.stdout.split(b"\0"):
        if not raw:
            continue
        rel = os.path.normpath(raw.decode("utf-8", "replace"))
        if not visible(rel):
            return rel
    return None


DESTRUCTIVE = {"rm", "rmdir", "dd", "chmod", "chown", "shred", "truncate", "mkfs", "kill", "pkill"}
DESTRUCTIVE_GIT = {"git push", "git reset", "git clean", "git checkout", "git rebase"}


def rule_hint(texts: list[str]) -> str:
    """The allow rule to suggest: a prefix rule, or the exact command for destructive ones."""
    first = texts[0].split() if texts else []
    if not first:
        return "*"
    if first[0] in DESTRUCTIVE or " ".join(first[:2]) in DESTRUCTIVE_GIT:
        return texts[0]
    if len(first) >= 2 and first[0] in ("git", "npm", "pip", "uv", "cargo", "make", "python"):
        return f"{first[0]} {first[1]}:*"
    return f"{first[0]}:*"
