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
5. the mode (the table in docs/tools.md: ``default`` asks before edits and commands that are
   not read-only; ``acceptEdits`` allows edits and mkdir/touch/cp/mv; ``plan`` and
   ``dontAsk`` deny what no rule allows; ``bypassPermissions`` allows).

   Writing a protected path (:mod:`journal_agent.tools.protected`: ``.claude/``, ``.journal/``
   but drafts, ``.mcp.json``, ``.claude-plugin/``, git's config, hooks and pointers — the list
   the sandbox keeps read-only for Bash) asks even in ``acceptEdits`` unless an allow rule
   names the path: an agent must not grant itself permissions or plant what runs later.
   Other tools (journal, profiling, MCP) are allowed unless a rule says otherwise, except in
   ``plan`` mode where an ``allow`` rule is not needed for them either.

6. "ask" is put to the ``prompt`` callback (the CLI passes one when stdin is a terminal);
   without one, ask means deny, and the reason says which rule to add.

"Read-only" Bash commands are a fixed list (``ls``, ``cat``, ``git status``, …) with no
output redirection other than to ``/dev/null`` and no ``$`` expansions; see :mod:`._shell`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from journal_agent.errors import ToolError, UserError
from journal_agent.tools._bash_policy import BashChecks, rule_hint
from journal_agent.tools._pathrules import path_matches
from journal_agent.tools._rules import (
    EDIT_TOOLS,
    MODES,
    READ_TOOLS,
    RULE_FAMILY,
    SECRET_EXCEPTIONS,
    SECRET_PATTERNS,
    SETTINGS_FILES,
    Mode,
    is_secret,
    is_secret_rel,
    name_matches,
    parse_rule,
    rule_matches,
    rules_permit,
)
from journal_agent.tools._shell import (
    ShellParseError,
    SimpleCommand,
    is_own_safe_command,
    is_plain_read_only,
    is_read_only,
    split_commands,
)
from journal_agent.tools.sandbox.config import SandboxSettings

__all__ = [
    "EDIT_TOOLS", "MODES", "READ_TOOLS", "RULE_FAMILY", "SECRET_EXCEPTIONS", "SECRET_PATTERNS",
    "SETTINGS_FILES", "Decision", "Mode", "PermissionPolicy", "Prompt", "parse_rule",
    "rule_matches", "rules_permit", "tty_prompt",
]  # fmt: skip

ACCEPT_EDITS_COMMANDS = {"mkdir", "touch", "cp", "mv"}

Prompt = Callable[[str, str], bool]  # (tool name, what it wants to do) -> approved?


@dataclass(frozen=True)
class Decision:
    behavior: Literal["allow", "deny"]
    reason: str
    rule: str | None = None
    # For Bash: may the command write the workspace (inside the sandbox)? True when the mode
    # lets it edit, an allow rule names it, or the user approved it; a read-only command let
    # through by default mode runs with the whole filesystem read-only.
    writes: bool = False

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
    writes: bool = False


class PermissionPolicy(BashChecks):
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
        sandbox: SandboxSettings | None = None,
        home: Path | None = None,
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
        self.sandbox = sandbox or SandboxSettings()
        self.home = home  # None: the real home directory (where ~/.ssh and friends are)
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

        settings = load_settings(root, home)
        perms = settings.permissions
        return cls(
            root,
            mode=mode or perms.default_mode or "default",
            allow=[*perms.allow, *allow],
            deny=[*perms.deny, *deny],
            ask=perms.ask,
            prompt=prompt,
            sandbox=settings.sandbox,
            home=home,
        )

    # -- public API -------------------------------------------------------------------------

    def check(
        self,
        tool_name: str,
        *,
        path: Path | None = None,
        command: str | None = None,
        confined: bool = True,
    ) -> Decision:
        """Allow or deny one call; an "ask" goes to the prompt callback (deny without one).

        ``confined``: whether a Bash command will run in the OS sandbox. Without one, every
        command that is not a plain read-only one needs approval.
        """
        verdict = self.evaluate(tool_name, path=path, command=command, confined=confined)
        if verdict.behavior != "ask":
            return Decision(verdict.behavior, verdict.reason, verdict.rule, verdict.writes)
        subject = command if command is not None else str(path) if path is not None else ""
        if self.prompt is not None:
            try:
                approved = self.prompt(tool_name, subject)
            except (EOFError, KeyboardInterrupt):
                approved = False
            if approved:
                writes = self.mode != "plan"
                return Decision("allow", "approved at the prompt", verdict.rule, writes)
            return Decision(
                "deny", f"Permission to use {tool_name} was refused by the user.", verdict.rule
            )
        return Decision("deny", self._ask_denied(tool_name, path, command, verdict), verdict.rule)

    def ensure(
        self,
        tool_name: str,
        *,
        path: Path | None = None,
        command: str | None = None,
        confined: bool = True,
    ) -> Decision:
        """:meth:`check`, raising :class:`ToolError` (an error result for the model) on deny."""
        decision = self.check(tool_name, path=path, command=command, confined=confined)
        if not decision.allowed:
            raise ToolError(decision.reason)
        return decision

    def evaluate(
        self,
        tool_name: str,
        *,
        path: Path | None = None,
        command: str | None = None,
        confined: bool = True,
    ) -> _Verdict:
        """The decision before any prompting: allow, ask or deny."""
        if path is not None:
            path = Path(os.path.realpath(path))
        if tool_name == "Bash":
            return self._evaluate_bash(command or "", confined)
        return self._evaluate_tool(tool_name, path)

    # -- tools other than Bash ----------------------------------------------------------------

    def _match(self, rules: list[str], tool_name: str, path: Path | None) -> str | None:
        for rule in rules:
            name, spec = parse_rule(rule)
            if not name_matches(name, tool_name):
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
        # Rules naming a path first: only they lift the secret default and the protected paths.
        rule = self._match(self._allow_named_first, tool_name, path)
        family = RULE_FAMILY.get(tool_name)
        secret = family == "Read" and path is not None and self._secret(path)
        guarded = family == "Edit" and path is not None and self._protected(path) is not None
        if rule and parse_rule(rule)[1] is None and (secret or guarded):
            rule = None  # a bare "Read"/"Edit" does not name it: the default below stands
        if rule:
            if tool_name in EDIT_TOOLS and self.mode == "plan":
                return _Verdict("deny", f"{tool_name} is not available in plan mode (read-only).")
            return _Verdict("allow", f"allowed by the rule {rule}", rule)

        if family == "Read":
            if path is not None and secret:
                what = "looks like a secret (keys, credentials, .env)"
                if not is_secret(path, self.root):
                    what = "is a hard link to a file hidden as a secret"
                return _Verdict(
                    "deny",
                    f"{shown} {what} and is not readable by default; if it is needed, add an "
                    f"allow rule such as Read(./{self._show(path)}).",
                )
            return _Verdict("allow", "reading is allowed")
        if family == "Edit":
            return self._evaluate_edit(tool_name, path)
        return _Verdict("allow", "no rule restricts this tool")

    def _evaluate_edit(self, tool_name: str, path: Path | None) -> _Verdict:
        """Write/Edit once no rule decided: the mode, and the paths that always ask."""
        if self.mode in ("plan", "dontAsk"):
            why = " (read-only)" if self.mode == "plan" else ""
            return _Verdict("deny", f"{tool_name} is not available in {self.mode} mode{why}.")
        protected = self._protected(path) if path is not None else None
        if protected and self.mode != "bypassPermissions":
            return _Verdict("ask", protected)
        if self.mode in ("acceptEdits", "bypassPermissions"):
            return _Verdict("allow", f"{self.mode} mode")
        return _Verdict("ask", "editing files needs approval in default mode")

    def _protected(self, path: Path) -> str | None:
        """Why Write/Edit must ask before changing ``path``: the one protected list the
        sandbox keeps read-only for Bash (:mod:`journal_agent.tools.protected`)."""
        from journal_agent.tools.sandbox.view import why_protected

        why = why_protected(self.root, path, self.sandbox, self.home)
        return f"it is a protected path: {why}" if why else None

    # -- Bash -----------------------------------------------------------------------------------
    def _evaluate_bash(self, command: str, confined: bool = True) -> _Verdict:
        if not command.strip():
            return _Verdict("deny", "The command is empty.")
        try:
            parts = self._flatten(split_commands(command), depth=0)
        except ShellParseError as exc:
            return _Verdict("deny", f"The command could not be parsed ({exc}); check its quoting.")
        if not parts:
            return _Verdict("deny", "The command is empty.")
        texts = [" ".join([*p.assignments, *p.words]) or p.text for p in parts]
        verdict = self._bash_rules_verdict(parts, texts)
        if verdict is not None:
            return verdict
        allowed_by = [self._bash_rule(self.allow, text) for text in texts]
        if problem := self._bash_default_denial(parts, allowed_by):
            return _Verdict("deny", problem)
        return self._bash_mode_verdict(parts, texts, allowed_by, confined)

    def _bash_rules_verdict(self, parts: list[SimpleCommand], texts: list[str]) -> _Verdict | None:
        """Deny and ask rules, which come before everything else."""
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
                    return _Verdict("allow", "bypassPermissions mode", rule, writes=True)
                return _Verdict("ask", f"the rule {rule} asks for approval", rule)
        return None

    def _bash_mode_verdict(
        self,
        parts: list[SimpleCommand],
        texts: list[str],
        allowed_by: list[str | None],
        confined: bool,
    ) -> _Verdict:
        """What the mode says once no rule decided: allow (writing or read-only), ask, deny."""
        if all(allowed_by):
            writes = self.mode != "plan"
            return _Verdict("allow", f"allowed by the rule {allowed_by[0]}", allowed_by[0], writes)
        if self.mode == "bypassPermissions":
            return _Verdict("allow", "bypassPermissions mode", writes=True)
        if self.mode in ("plan", "dontAsk"):
            return _Verdict(
                "deny",
                f"Bash is not available in {self.mode} mode unless an allow rule such as "
                f"Bash({rule_hint(texts)}) permits the command.",
            )
        pending = [p for ok, p in zip(allowed_by, parts, strict=True) if not ok]
        if not confined:
            # No sandbox: the reading of the command line is the only line, and it cannot win
            # against shells, git or python. Only a plain read-only command goes unasked.
            if all(is_plain_read_only(p) or is_own_safe_command(p) for p in pending):
                return _Verdict("allow", "a plain read-only command")
            return _Verdict(
                "ask",
                "without a sandbox, every command that is not a plain read-only one needs approval",
            )
        auto = ACCEPT_EDITS_COMMANDS if self.mode == "acceptEdits" else set()
        if all(is_read_only(p) or is_own_safe_command(p) or p.name in auto for p in pending):
            # An own command never widens the view of the line it is on: alone on its line the
            # host runs it (see .own_commands); beside others it gets what they get.
            return _Verdict(
                "allow",
                "read-only command, or journal-agent's own journal/estimate",
                writes=self.mode == "acceptEdits",
            )
        return _Verdict("ask", "the command may change files or run programs")

    def _secret(self, path: Path) -> bool:
        """Secret by name, or another name (a hard link) of a file the sandbox hides: a
        ``notes.txt`` linked to ``.env`` before the session holds the same bytes."""
        if is_secret(path, self.root):
            return True
        try:
            if os.stat(path).st_nlink < 2:  # the common case: one name, nothing to look for
                return False
        except OSError:
            return False
        real = Path(os.path.realpath(path))
        return real in self._hidden_links()

    def _hidden_links(self) -> set[Path]:
        from journal_agent.tools.sandbox.view import hidden_links

        return hidden_links(self.root, self.sandbox, self.read_deny_paths(), self.home)

    def read_deny_paths(self) -> tuple[str, ...]:
        """The paths ``Read(...)`` deny rules name, in the sandbox's path syntax (where
        ``/x`` is absolute, while a rule's ``/x`` is relative to the workspace)."""
        out = []
        for rule in self.deny:
            name, spec = parse_rule(rule)
            if name != "Read" or spec is None:
                continue
            spec = spec.strip()
            if spec.startswith("/") and not spec.startswith("//"):
                spec = "." + spec
            out.append(spec)
        return tuple(out)

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
        # Hard links to hidden files (found only when a hidden file has more than one name).
        links = {p.relative_to(self.root).as_posix() for p in self._hidden_links()
                 if self.root in p.parents} if secrets else set()  # fmt: skip
        if not path_rules:
            if not secrets:
                return None
            return lambda rel: not is_secret_rel(rel) and os.path.normpath(rel) not in links

        def visible(rel: str) -> bool:
            if os.path.normpath(rel) in links:
                return False
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

    def _ask_denied(
        self, tool_name: str, path: Path | None, command: str | None, verdict: _Verdict
    ) -> str:
        if tool_name == "Bash":
            texts = self._needing_approval(command or "")
            hint = f"Bash({rule_hint(texts)})"
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


def tty_prompt() -> Prompt | None:
    """A prompt on the terminal, or None when stdin is not one (then "ask" means deny)."""
    import sys

    if not sys.stdin.isatty():
        return None

    def ask(tool_name: str, subject: str) -> bool:
        from journal_agent.terminal_text import visible

        # The question goes to stderr: stdout carries the tool result. What the model asks for
        # is shown as it is: an escape sequence in a command must not redraw the question.
        asked = visible(f"{tool_name}: {subject}")
        print(f"Allow {asked}? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        return answer in ("y", "yes")

    return ask
