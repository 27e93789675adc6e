"""What a command or agent file in the project may grant itself: what the plugin's own file of
that name grants, and what you approved — nothing more.

A project's ``.claude/commands/*.md`` and ``.claude/agents/*.md`` are text anyone with write
access to the repository can change, and /learn edits its own file by design. Their grants are
permissions: a command's ``allowed-tools`` run without asking while it runs (and permit its
``!`cmd``` lines); an agent's ``permissionMode`` sets the mode it runs in. So a project file's
grants count only as far as

- the plugin's file of the same name grants (an ejected copy keeps its original's), and
- what you approved for that file: ``journal-agent commands --approve NAME`` /
  ``journal-agent agents --approve NAME`` records its grants as they are now in
  ``.journal/approved-tools.json`` (a protected path: no tool call can write it).

A grant beyond both is ignored — the calls it would have let through ask as usual — and the run
says so in one sentence; ``journal-agent commands`` / ``agents`` show it. Files in your home
directory (``~/.claude/``) and the plugin's own are yours and taken as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from journal_agent.definitions import (
    AgentDefinition,
    CommandDefinition,
    parse_agent,
    parse_command,
)
from journal_agent.errors import JournalAgentError, UserError
from journal_agent.paths import plugin_root, state_dir

Kind = Literal["commands", "agents"]
APPROVALS_FILE = "approved-tools.json"
# More permissive to the right; "auto" is "default" here (no classifier).
_MODE_RANK = {"plan": 0, "dontAsk": 0, "default": 1, "auto": 1, "acceptEdits": 2,
              "bypassPermissions": 3}  # fmt: skip


@dataclass(frozen=True)
class Grants:
    """A definition's grants, split into those that count and those that are ignored."""

    allowed: tuple[str, ...]  # allowed-tools rules, or the permission mode (one item)
    ignored: tuple[str, ...]
    notice: str | None = None  # one sentence when something is ignored


def approvals_path(root: Path) -> Path:
    return state_dir(root) / APPROVALS_FILE


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
    """Record ``definition``'s grants as they are now as approved; return them."""
    from journal_agent.atomic import atomic_write
    from journal_agent.locks import held

    if definition.origin != "project":
        raise UserError(
            f"{definition.name} is not a project file ({definition.origin}: "
            f"{definition.source}); its grants are taken as they are, there is nothing to approve."
        )
    granted = _grants_of(kind, definition)
    path = approvals_path(root)
    with held(state_dir(root) / "locks" / "approvals.lock", 30,
              "another process has held the approvals lock for 30 s; try again."):  # fmt: skip
        data = _load(root)
        data.setdefault(kind, {})[definition.name] = {
            "file": _rel(definition.source, root),
            "grants": granted,
        }
        atomic_write(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return granted


def _grants_of(kind: Kind, definition: CommandDefinition | AgentDefinition) -> list[str]:
    if kind == "commands":
        assert isinstance(definition, CommandDefinition)
        return list(definition.allowed_tools or ())
    assert isinstance(definition, AgentDefinition)
    return [definition.permission_mode] if definition.permission_mode else []


def _approved(root: Path, kind: Kind, definition: CommandDefinition | AgentDefinition) -> list[str]:
    """What you approved for this very file (a record for another path does not count)."""
    entry = _load(root).get(kind, {}).get(definition.name)
    if not isinstance(entry, dict) or entry.get("file") != _rel(definition.source, root):
        return []
    grants = entry.get("grants")
    return [g for g in grants if isinstance(g, str)] if isinstance(grants, list) else []


def _load(root: Path) -> dict[str, Any]:
    """The approvals; a missing or unreadable file approves nothing (and is rewritten whole by
    the next ``--approve``)."""
    try:
        data = json.loads(approvals_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
        f"run `journal-agent {kind} --approve {name}` if you trust it."
    )


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
