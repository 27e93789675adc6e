"""Permission rules in Claude Code's syntax: parsing a rule, matching it against a call, and
the names that look like secrets. The policy that applies them is
:mod:`journal_agent.tools.permissions`; the reading of a Bash command line is
:mod:`journal_agent.tools._bash_policy`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from journal_agent.tools._pathrules import path_matches, translate_glob
from journal_agent.tools._shell import ShellParseError, split_commands

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


# A `*` in the name only as Claude Code's MCP wildcard (`mcp__server__*`; see parse_rule).
_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_.:*-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


def name_matches(rule_name: str, tool_name: str) -> bool:
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


def bash_pattern_matches(spec: str, command: str) -> bool:
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


def bash_parts(command: str) -> list[str]:
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
    if not name_matches(name, tool_name):
        return False
    if spec is None:
        return True
    if tool_name == "Bash":
        return all(bash_pattern_matches(spec, part) for part in bash_parts(content))
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
    return all(any(rule_matches(r, "Bash", part) for r in rules) for part in bash_parts(content))


def _secret_regex() -> re.Pattern[str]:
    # Case-insensitive: `.ENV` is another file than `.env` on Linux, and as secret.
    alternatives = "|".join(translate_glob(p) for p in SECRET_PATTERNS)
    return re.compile(rf"(?:^|/)(?:{alternatives})(?:/|$)", re.IGNORECASE)


_SECRET_RE = _secret_regex()


def is_secret_rel(rel: str) -> bool:
    """Secret by name, for a path relative to the workspace (or absolute), in posix form."""
    name = rel.rsplit("/", 1)[-1].lower()
    if name in SECRET_EXCEPTIONS or name.endswith(".pub"):
        return False
    return _SECRET_RE.search(rel) is not None


def is_secret(path: Path, root: Path) -> bool:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.as_posix()
    return is_secret_rel(rel)
