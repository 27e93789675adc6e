"""Permission rules in Claude Code's syntax, and the policy every tool call goes through.

Rules (in ``permissions.allow`` / ``deny`` / ``ask`` of ``.claude/settings.json`` or
``.journal/settings.json``, or ``--allow`` / ``--deny`` on the command line):

- ``Bash`` / ``Read`` / ``Edit`` / any tool name alone: the whole tool.
- ``Bash(npm run test)``: exactly that command. ``Bash(git diff:*)``: that command prefix
  (``git diff`` and ``git diff --stat``, not ``git difftool``). ``*`` elsewhere matches
  anything (``Bash(git * main)``). A compound command (``a && b``, ``a | b``) is covered by a
  rule only if every part is.
- ``Read(./secrets/**)``, ``Edit(src/**)``, ``Read(//etc/**)``, ``Read(~/.ssh/**)``,
  ``Read(*.pem)``: gitignore-style paths (see :mod:`journal_agent.tools._pathrules`).
  ``Read`` rules also govern Grep and Glob; ``Edit`` rules govern Write (as in Claude Code).

Order of evaluation (first that applies wins):

1. a ``deny`` rule matches → deny;
2. an ``ask`` rule matches → ask (allowed outright in ``bypassPermissions``);
3. built-in defaults → deny: reading secrets (``.env``, keys, credentials), ``sudo``, a Bash
   command naming a path outside the workspace (absolute paths, ``..``, ``~``, ``$HOME``,
   a symlink leading out, ``cd /``), a command line we cannot parse. An allow rule lifts
   one only by naming it (``Read(./.env)``, ``Bash(cat /etc/hostname)``); a bare ``Read``
   or a prefix rule like ``Bash(git diff:*)`` does not;
4. an ``allow`` rule matches → allow;
5. the mode:

   =====================  ==============  ==============  ================================
   mode                   Read/Grep/Glob  Write/Edit      Bash
   =====================  ==============  ==============  ================================
   ``default``            allow           ask             read-only commands allow, else ask
   ``acceptEdits``        allow           allow           read-only + mkdir/touch/cp/mv
                                                          allow, else ask
   ``plan``               allow           deny            deny
   ``dontAsk``            allow           deny            deny
   ``bypassPermissions``  allow           allow           allow
   =====================  ==============  ==============  ================================

   Writing our own settings files (``.claude/settings*.json``, ``.journal/settings.json``)
   always asks unless an allow rule names them: an agent must not grant itself permissions.
   Other tools (journal, profiling, MCP) are allowed unless a rule says otherwise, except in
   ``plan`` mode where an ``allow`` rule is not needed for them either.

6. "ask" is put to the ``prompt`` callback (the CLI passes one when stdin is a terminal);
   without one, ask means deny, and the reason says which rule to add.

"Read-only" Bash commands are a fixed list (``ls``, ``cat``, ``head``, ``rg``, ``grep``,
``find`` without ``-exec``/``-delete``, ``git status/diff/log/show/...``, ``pip list``,
``python -c CODE`` when CODE has no write/exec/network-looking names, ...) with no output
redirection other than to ``/dev/null`` and no ``$`` expansions; see :mod:`._shell`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from journal_agent.errors import UserError
from journal_agent.tools._pathrules import path_matches, translate_glob
from journal_agent.tools._shell import (
    PRIVILEGE,
    ShellParseError,
    SimpleCommand,
    candidate_paths,
    cd_target,
    escapes,
    inner_scripts,
    is_own_safe_command,
    is_read_only,
    is_safe_device,
    recursive_search,
    split_commands,
)
from journal_agent.tools.base import ToolError

Mode = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"]
# Claude Code's "auto" mode approves through a model classifier; we have none, so it behaves as
# "default" here. It must still parse: the settings files are shared with Claude Code.
MODES: tuple[str, ...] = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")

READ_TOOLS = {"Read", "Grep", "Glob", "LS", "NotebookRead"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}
# Which rule name governs a tool: Edit rules cover every editing tool, Read rules the searches.
RULE_FAMILY = {**{t: "Edit" for t in EDIT_TOOLS}, **{t: "Read" for t in READ_TOOLS}}

SECRET_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".aws/credentials",
    ".ssh",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    "secrets.json",
    ".git-credentials",
)
# Example files are meant to be read.
SECRET_EXCEPTIONS = (".env.example", ".env.sample", ".env.template", ".env.dist")
SETTINGS_FILES = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".journal/settings.json",
)
ACCEPT_EDITS_COMMANDS = {"mkdir", "touch", "cp", "mv"}

Prompt = Callable[[str, str], bool]  # (tool name, what it wants to do) -> approved?


@dataclass(frozen=True)
class Decision:
    behavior: Literal["allow", "deny"]
    reason: str
    rule: str | None = None

    @property
    def allowed(self) -> bool:
        return self.behavior == "allow"

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True)
class _Verdict:
    behavior: Literal["allow", "ask", "deny"]
    reason: str
    rule: str | None = None


# A `*` in the name only as Claude Code's MCP wildcard (`mcp__server__*`; see parse_rule).
_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_.:*-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


def _name_matches(rule_name: str, tool_name: str) -> bool:
    if "*" in rule_name:
        return fnmatch.fnmatchcase(tool_name, rule_name)
    return rule_name in (tool_name, RULE_FAMILY.get(tool_name, tool_name))


def parse_rule(rule: str) -> tuple[str, str | None]:
    """``"Bash(git diff:*)"`` → ``("Bash", "git diff:*")``; ``"Edit"`` → ``("Edit", None)``."""
    m = _RULE_RE.match(rule)
    if not m or ("*" in m.group(1) and not m.group(1).startswith("mcp__")):
        raise ValueError(
            f"permission rule {rule!r} is not of the form Tool or Tool(specifier), "
            "e.g. Bash(git diff:*) or Read(./secrets/**)"
        )
    spec = m.group(2)
    if spec is not None and spec.strip() in ("", "*", "**"):
        spec = None  # Bash() / Bash(*) mean the whole tool
    return m.group(1), spec


def _bash_pattern_matches(spec: str, command: str) -> bool:
    command = " ".join(command.split())
    spec = " ".join(spec.split())
    if spec.endswith(":*"):
        prefix = spec[:-2].rstrip()
        return command == prefix or command.startswith(prefix + " ")
    if "*" not in spec:
        return command == spec
    # "ls *" also matches a bare "ls" (as the legacy "ls:*" did).
    if spec.endswith(" *") and command == spec[:-2]:
        return True
    regex = ".*".join(re.escape(part) for part in spec.split("*"))
    return re.fullmatch(regex, command, re.DOTALL) is not None


def _bash_parts(command: str) -> list[str]:
    try:
        parts = split_commands(command)
    except ShellParseError:
        return [command]
    texts = [" ".join([*p.assignments, *p.words]) for p in parts]
    return [t for t in texts if t] or [command]


def rule_matches(rule: str, tool_name: str, content: str, root: Path | None = None) -> bool:
    """Does ``rule`` cover calling ``tool_name`` with ``content``?

    ``content`` is the command for Bash (every part of a compound command must match) and the
    path for file tools (relative paths are taken against ``root``, default the current
    directory). A bare rule (``Bash``) covers any content. Used for the ``allowed-tools`` of
    a slash command as well as by the policy.
    """
    name, spec = parse_rule(rule)
    if not _name_matches(name, tool_name):
        return False
    if spec is None:
        return True
    if tool_name == "Bash":
        return all(_bash_pattern_matches(spec, part) for part in _bash_parts(content))
    if tool_name in RULE_FAMILY:
        base = Path(os.path.realpath(root or Path.cwd()))
        path = Path(content).expanduser()
        path = Path(os.path.realpath(path if path.is_absolute() else base / path))
        return path_matches(spec, path, base)
    return spec == content


def rules_permit(rules: Iterable[str], tool_name: str, content: str) -> bool:
    """True if each part of ``content`` is covered by at least one of ``rules``.

    ``allowed-tools: Bash(git status:*), Bash(git diff:*)`` permits
    ``git status && git diff``, which no single rule covers.
    """
    rules = list(rules)
    if tool_name != "Bash":
        return any(rule_matches(r, tool_name, content) for r in rules)
    return all(any(rule_matches(r, "Bash", part) for r in rules) for part in _bash_parts(content))


def _secret_regex() -> re.Pattern[str]:
    alternatives = "|".join(translate_glob(p) for p in SECRET_PATTERNS)
    return re.compile(rf"(?:^|/)(?:{alternatives})(?:/|$)")


_SECRET_RE = _secret_regex()


def _is_secret_rel(rel: str) -> bool:
    """Secret by name, for a path relative to the workspace (or absolute), in posix form."""
    name = rel.rsplit("/", 1)[-1]
    if name in SECRET_EXCEPTIONS or name.endswith(".pub"):
        return False
    return _SECRET_RE.search(rel) is not None


def _is_secret(path: Path, root: Path) -> bool:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.as_posix()
    return _is_secret_rel(rel)


class PermissionPolicy:
    """Decides whether a tool call may run. Build with :meth:`from_settings` in practice."""

    def __init__(
        self,
        root: Path,
        *,
        mode: str = "default",
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        ask: Iterable[str] = (),
        prompt: Prompt | None = None,
    ) -> None:
        if mode not in MODES:
            raise UserError(f"unknown permission mode {mode!r}; use one of {', '.join(MODES)}.")
        self.root = Path(os.path.realpath(root))
        self.mode = mode
        self.allow, self.deny, self.ask = list(allow), list(deny), list(ask)
        for rule in (*self.allow, *self.deny, *self.ask):
            try:
                parse_rule(rule)
            except ValueError as exc:
                raise UserError(f"{exc}; fix it in your settings or on the command line.") from None
        self.prompt = prompt
        self._allow_named_first = sorted(self.allow, key=lambda r: parse_rule(r)[1] is None)

    @classmethod
    def from_settings(
        cls,
        root: Path,
        *,
        mode: str | None = None,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        prompt: Prompt | None = None,
        home: Path | None = None,
    ) -> PermissionPolicy:
        """Rules from the settings files plus command-line ``allow`` / ``deny`` and ``mode``."""
        from journal_agent.settings import load_settings

        perms = load_settings(root, home).permissions
        return cls(
            root,
            mode=mode or perms.default_mode or "default",
            allow=[*perms.allow, *allow],
            deny=[*perms.deny, *deny],
            ask=perms.ask,
            prompt=prompt,
        )

    # -- public API -------------------------------------------------------------------------

    def check(
        self, tool_name: str, *, path: Path | None = None, command: str | None = None
    ) -> Decision:
        """Allow or deny one call; an "ask" goes to the prompt callback (deny without one)."""
        verdict = self.evaluate(tool_name, path=path, command=command)
        if verdict.behavior != "ask":
            return Decision(verdict.behavior, verdict.reason, verdict.rule)
        subject = command if command is not None else str(path) if path is not None else ""
        if self.prompt is not None:
            try:
                approved = self.prompt(tool_name, subject)
            except (EOFError, KeyboardInterrupt):
                approved = False
            if approved:
                return Decision("allow", "approved at the prompt", verdict.rule)
            return Decision(
                "deny", f"Permission to use {tool_name} was refused by the user.", verdict.rule
            )
        return Decision("deny", self._ask_denied(tool_name, path, command, verdict), verdict.rule)

    def ensure(
        self, tool_name: str, *, path: Path | None = None, command: str | None = None
    ) -> None:
        """:meth:`check`, raising :class:`ToolError` (an error result for the model) on deny."""
        decision = self.check(tool_name, path=path, command=command)
        if not decision.allowed:
            raise ToolError(decision.reason)

    def evaluate(
        self, tool_name: str, *, path: Path | None = None, command: str | None = None
    ) -> _Verdict:
        """The decision before any prompting: allow, ask or deny."""
        if path is not None:
            path = Path(os.path.realpath(path))
        if tool_name == "Bash":
            return self._evaluate_bash(command or "")
        return self._evaluate_tool(tool_name, path)

    # -- tools other than Bash ----------------------------------------------------------------

    def _match(self, rules: list[str], tool_name: str, path: Path | None) -> str | None:
        for rule in rules:
            name, spec = parse_rule(rule)
            if not _name_matches(name, tool_name):
                continue
            if spec is None:
                return rule
            if (
                path is not None
                and tool_name in RULE_FAMILY
                and path_matches(spec, path, self.root)
            ):
                return rule
        return None

    def _evaluate_tool(self, tool_name: str, path: Path | None) -> _Verdict:
        shown = self._show(path) if path is not None else tool_name
        if rule := self._match(self.deny, tool_name, path):
            return _Verdict("deny", f"{tool_name} of {shown} is denied by the rule {rule}.", rule)
        if rule := self._match(self.ask, tool_name, path):
            if self.mode == "bypassPermissions":
                return _Verdict("allow", "bypassPermissions mode", rule)
            return _Verdict("ask", f"the rule {rule} asks for approval", rule)
        # Rules naming a path first: only they lift the secret default.
        rule = self._match(self._allow_named_first, tool_name, path)
        if rule and parse_rule(rule)[1] is None and path and _is_secret(path, self.root):
            rule = None  # a bare "Read" does not name the secret: the default below stands
        if rule:
            if tool_name in EDIT_TOOLS and self.mode == "plan":
                return _Verdict("deny", f"{tool_name} is not available in plan mode (read-only).")
            return _Verdict("allow", f"allowed by the rule {rule}", rule)

        family = RULE_FAMILY.get(tool_name)
        if family == "Read":
            if path is not None and _is_secret(path, self.root):
                return _Verdict(
                    "deny",
                    f"{shown} looks like a secret (keys, credentials, .env) and is not readable "
                    f"by default; if it is needed, add an allow rule such as "
                    f"Read(./{self._show(path)}).",
                )
            return _Verdict("allow", "reading is allowed")
        if family == "Edit":
            if self.mode in ("plan", "dontAsk"):
                why = " (read-only)" if self.mode == "plan" else ""
                return _Verdict("deny", f"{tool_name} is not available in {self.mode} mode{why}.")
            if path is not None and self._is_settings_file(path):
                if self.mode == "bypassPermissions":
                    return _Verdict("allow", "bypassPermissions mode")
                return _Verdict("ask", "it changes permission settings")
            if self.mode in ("acceptEdits", "bypassPermissions"):
                return _Verdict("allow", f"{self.mode} mode")
            return _Verdict("ask", "editing files needs approval in default mode")
        return _Verdict("allow", "no rule restricts this tool")

    def _is_settings_file(self, path: Path) -> bool:
        return any(path == self.root / rel for rel in SETTINGS_FILES)

    # -- Bash -----------------------------------------------------------------------------------

    def _bash_rule(self, rules: list[str], part: str) -> str | None:
        for rule in rules:
            name, spec = parse_rule(rule)
            if name != "Bash":
                continue
            if spec is None or _bash_pattern_matches(spec, part):
                return rule
        return None

    def _evaluate_bash(self, command: str) -> _Verdict:
        if not command.strip():
            return _Verdict("deny", "The command is empty.")
        try:
            parts = self._flatten(split_commands(command), depth=0)
        except ShellParseError as exc:
            return _Verdict("deny", f"The command could not be parsed ({exc}); check its quoting.")
        if not parts:
            return _Verdict("deny", "The command is empty.")
        texts = [" ".join([*p.assignments, *p.words]) or p.text for p in parts]

        for text in texts:
            if rule := self._bash_rule(self.deny, text):
                return _Verdict("deny", f"`{text}` is denied by the rule {rule}.", rule)
        # Read deny rules protect files from `cat` as well as from Read.
        if problem := self._bash_read_denied(parts):
            return _Verdict("deny", problem)
        # `grep -r KEY .` would read .env as surely as `cat .env`.
        if problem := self._bash_tree_reads_denied(parts):
            return _Verdict("deny", problem)
        for text in texts:
            if rule := self._bash_rule(self.ask, text):
                if self.mode == "bypassPermissions":
                    return _Verdict("allow", "bypassPermissions mode", rule)
                return _Verdict("ask", f"the rule {rule} asks for approval", rule)
        allowed_by = [self._bash_rule(self.allow, text) for text in texts]
        if problem := self._bash_default_denial(parts, allowed_by):
            return _Verdict("deny", problem)
        if all(allowed_by):
            return _Verdict("allow", f"allowed by the rule {allowed_by[0]}", allowed_by[0])
        if self.mode == "bypassPermissions":
            return _Verdict("allow", "bypassPermissions mode")
        if self.mode in ("plan", "dontAsk"):
            return _Verdict(
                "deny",
                f"Bash is not available in {self.mode} mode unless an allow rule such as "
                f"Bash({_rule_hint(texts)}) permits the command.",
            )
        auto = {"acceptEdits": ACCEPT_EDITS_COMMANDS}.get(self.mode, set())
        if all(
            ok or is_read_only(p) or is_own_safe_command(p) or p.name in auto
            for ok, p in zip(allowed_by, parts, strict=True)
        ):
            return _Verdict("allow", "read-only command, or journal-agent's own journal/estimate")
        return _Verdict("ask", "the command may change files or run programs")

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
            target = cd_target(part)
            if target not in (None, "-"):
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
                    hidden = _first_hidden_file(self.root, flags, sorted(dirs), visible)
                    if hidden is not None:
                        return (
                            f"`{part.text}` would read {hidden}, which looks like a secret or "
                            "is under a Read deny rule. Use the Grep tool, which leaves such "
                            "files out, or search narrower paths."
                        )
            target = cd_target(part)
            if target not in (None, "-"):
                for cwd in list(cwds):
                    if escapes(target, cwd, self.root) is None:
                        new = Path(os.path.realpath(cwd / target))
                        if new not in cwds:
                            cwds.append(new)
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
                    secret = colon and spec and not word.startswith("-") and _is_secret_rel(spec)
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
            if _is_secret(path, self.root) and not any(
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

    def search_filter(
        self, tool_name: str = "Grep", *, secrets: bool = True
    ) -> Callable[[str], bool] | None:
        """A fast ``visible(rel_path)`` for the files a search returns.

        Grep must not show the contents of files the policy would refuse to Read (secrets,
        ``Read`` deny rules); Glob (``secrets=False``) lists secret files by name but honours
        deny rules. Called for every file in a result, so the common case (no path rules) is
        one regex, and None means every file is visible.
        """
        path_rules = [
            r
            for r in (*self.deny, *self.ask, *self.allow)
            if parse_rule(r)[0] in ("Read", tool_name) and parse_rule(r)[1] is not None
        ]
        if not path_rules:
            if not secrets:
                return None
            return lambda rel: not _is_secret_rel(rel)

        def visible(rel: str) -> bool:
            path = self.root / rel
            if not secrets and not self._match(self.deny, tool_name, path):
                return True
            return self._evaluate_tool(tool_name, path).behavior != "deny"

        return visible

    # -- messages -------------------------------------------------------------------------------

    def _show(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def _needing_approval(self, command: str) -> list[str]:
        """The parts of ``command`` that no allow rule covers and that are not read-only:
        the ones a suggested rule must name (not ``ls`` in ``ls && rm x``)."""
        try:
            parts = split_commands(command)
        except ShellParseError:
            return _bash_parts(command)
        texts = [
            " ".join([*p.assignments, *p.words])
            for p in parts
            if not is_read_only(p)
            and not self._bash_rule(self.allow, " ".join([*p.assignments, *p.words]))
        ]
        return [t for t in texts if t] or _bash_parts(command)

    def _ask_denied(
        self, tool_name: str, path: Path | None, command: str | None, verdict: _Verdict
    ) -> str:
        if tool_name == "Bash":
            texts = self._needing_approval(command or "")
            hint = f"Bash({_rule_hint(texts)})"
            what = f"`{command}`"
        elif path is not None:
            hint = f"{RULE_FAMILY.get(tool_name, tool_name)}(./{self._show(path)})"
            what = f"{tool_name} of {self._show(path)}"
        else:
            hint, what = tool_name, tool_name
        if verdict.rule is not None:  # an ask rule: an allow rule cannot override it
            return (
                f"Permission denied: {what} needs approval (the rule {verdict.rule} asks for it) "
                f"and no one can be asked here. Run it where you can answer the prompt (a "
                f"terminal), or remove that ask rule."
            )
        return (
            f"Permission denied: {what} needs approval ({verdict.reason}) and no one can be "
            f"asked here. To permit it, add the allow rule {hint} (settings or --allow), "
            f"or choose a mode with --mode (acceptEdits, bypassPermissions)."
        )


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


def _rule_hint(texts: list[str]) -> str:
    """The allow rule to suggest: a prefix rule, or the exact command for destructive ones."""
    first = texts[0].split() if texts else []
    if not first:
        return "*"
    if first[0] in DESTRUCTIVE or " ".join(first[:2]) in DESTRUCTIVE_GIT:
        return texts[0]
    if len(first) >= 2 and first[0] in ("git", "npm", "pip", "uv", "cargo", "make", "python"):
        return f"{first[0]} {first[1]}:*"
    return f"{first[0]}:*"


def tty_prompt() -> Prompt | None:
    """A prompt on the terminal, or None when stdin is not one (then "ask" means deny)."""
    import sys

    if not sys.stdin.isatty():
        return None

    def ask(tool_name: str, subject: str) -> bool:
        # The question goes to stderr: stdout carries the tool result.
        print(f"Allow {tool_name}: {subject}? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        return answer in ("y", "yes")

    return ask
