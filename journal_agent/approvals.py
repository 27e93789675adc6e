"""What a command or agent file in the project may grant itself: what the plugin's own file of
that name grants, and what you approved — nothing more.

A project's ``.claude/commands/*.md`` and ``.claude/agents/*.md`` are text anyone with write
access to the repository can change, and /learn edits its own file by design. Their grants are
permissions: a command's ``allowed-tools`` run without asking while it runs (and permit its
``!`cmd``` lines); an agent's ``permissionMode`` sets the mode it runs in. So a project file's
grants count only as far as

- the plugin's file of the same name grants (an ejected copy keeps its original's), and
- what the file grants when you approved the file as it is now: ``journal-agent commands
  --approve NAME`` / ``agents --approve NAME`` (or ``journal-agent trust``, every file at once)
  asks you on your terminal and records the file's SHA-256 in the trust store, outside the
  workspace (:mod:`journal_agent.trust_store`); a changed file is not approved any more.

A grant beyond both is ignored — the calls it would have let through ask as usual — and the run
says so in one sentence; ``journal-agent commands`` / ``agents`` show it. Files in your home
directory (``~/.claude/``) and the plugin's own are yours and taken as they are. No tool call
can approve (:mod:`journal_agent.terminal_confirm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from journal_agent.definitions import (
    AgentDefinition,
    CommandDefinition,
    parse_agent,
    parse_command,
)
from journal_agent.errors import JournalAgentError, UserError
from journal_agent.paths import plugin_root

Kind = Literal["commands", "agents"]
# More permissive to the right; "auto" is "default" here (no classifier).
_MODE_RANK = {"plan": 0, "dontAsk": 0, "default": 1, "auto": 1, "acceptEdits": 2,
              "bypassPermissions": 3}  # fmt: skip


@dataclass(frozen=True)
class Grants:
    """A definition's grants, split into those that count and those that are ignored."""

    allowed: tuple[str, ...]  # allowed-tools rules, or the permission mode (one item)
    ignored: tuple[str, ...]
    notice: str | None = None  # one sentence when something is ignored


def command_grants(cmd: CommandDefinition, root: Path) -> Grants:
    """The ``allowed-tools`` of ``cmd`` that count (see the module's docstring)."""
    rules = tuple(cmd.allowed_tools or ())
    if cmd.origin != "project" or not rules:
        return Grants(rules, ())
    original = _plugin_command(cmd.name)
    base = [*(original.allowed_tools or () if original else ()), *_approved(root, "commands", cmd)]
    allowed = tuple(r for r in rules if _covered(r, base))
    ignored = tuple(r for r in rules if r not in allowed)
    if not ignored:
        return Grants(rules, ())
    return Grants(allowed, ignored, _notice("commands", cmd.name, _rel(cmd.source, root), ignored))


def agent_mode(agent: AgentDefinition, root: Path) -> Grants:
    """The ``permissionMode`` of ``agent`` if it counts: ``allowed`` holds the mode to use
    (empty: the settings' default)."""
    mode = agent.permission_mode
    if mode is None or agent.origin != "project" or _MODE_RANK.get(mode, 1) <= 1:
        return Grants((mode,) if mode else (), ())
    original = _plugin_agent(agent.name)
    base = [original.permission_mode] if original and original.permission_mode else []
    base += _approved(root, "agents", agent)
    if any(_MODE_RANK.get(b, 1) >= _MODE_RANK[mode] for b in base):
        return Grants((mode,), ())
    notice = _notice("agents", agent.name, _rel(agent.source, root), (f"permissionMode: {mode}",))
    return Grants((), (mode,), notice)


def approve(kind: Kind, definition: CommandDefinition | AgentDefinition, root: Path) -> list[str]:
    """Ask on the terminal, then record ``definition``'s file as approved as it is now; return
    what it grants."""
    from journal_agent import trust_store
    from journal_agent.terminal_confirm import confirm

    if definition.origin != "project":
        raise UserError(
            f"{definition.name} is not a project file ({definition.origin}: "
            f"{definition.source}); its grants are taken as they are, there is nothing to approve."
        )
    granted = _grants_of(kind, definition)
    rel = _rel(definition.source, root)
    what = ", ".join(granted) if granted else "nothing"
    confirm(
        f"approving {rel}",
        [f"{rel} grants: {what}", f"  (sha256 {definition.digest[:12]}…; read the file first)"],
        f"journal-agent {kind} --approve {definition.name} --root {root}",
    )
    trust_store.record(root, {rel: definition.digest})
    return granted


def _grants_of(kind: Kind, definition: CommandDefinition | AgentDefinition) -> list[str]:
    if kind == "commands":
        assert isinstance(definition, CommandDefinition)
        return list(definition.allowed_tools or ())
    assert isinstance(definition, AgentDefinition)
    return [definition.permission_mode] if definition.permission_mode else []


def _approved(root: Path, kind: Kind, definition: CommandDefinition | AgentDefinition) -> list[str]:
    """Everything the file grants if you approved it exactly as it was parsed, else nothing."""
    from journal_agent import trust_store

    if not definition.digest:
        return []
    if not trust_store.is_approved(root, _rel(definition.source, root), definition.digest):
        return []
    return _grants_of(kind, definition)


def _covered(rule: str, base: list[str]) -> bool:
    """``rule`` is granted by ``base``: the same rule, or the bare tool it narrows."""
    from journal_agent.tools._rules import parse_rule

    norm = " ".join(rule.split())
    try:
        name, _ = parse_rule(rule)
    except ValueError:
        return False
    for b in base:
        if " ".join(b.split()) == norm:
            return True
        try:
            if parse_rule(b) == (name, None):
                return True
        except ValueError:
            continue
    return False


def _plugin_command(name: str) -> CommandDefinition | None:
    path = plugin_root() / "commands" / Path(*name.split(":")).with_suffix(".md")
    try:
        return parse_command(path, name, "plugin") if path.is_file() else None
    except JournalAgentError:  # a broken plugin file grants nothing
        return None


def _plugin_agent(name: str) -> AgentDefinition | None:
    for path in sorted((plugin_root() / "agents").glob("*.md")):
        try:
            agent = parse_agent(path, "plugin")
        except JournalAgentError:
            continue
        if agent.name == name:
            return agent
    return None


def _notice(kind: Kind, name: str, rel: str, ignored: tuple[str, ...]) -> str:
    what = "command" if kind == "commands" else "agent"
    return (
        f"{rel} grants {', '.join(ignored)} beyond what the plugin's {what} grants and you "
        f"have not approved it, so it is ignored (those calls ask as usual); read the file and "
        f"run `journal-agent {kind} --approve {name}` in your terminal if you trust it."
    )


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
