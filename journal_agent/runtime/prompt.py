"""System prompts and tool selection for an agent definition."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from journal_agent.runtime.dispatch import TOOL_ALIASES
from journal_agent.tools.base import Tool

# For slash commands and the general-purpose sub-agent: the command text (or Task prompt) is
# the first user message; this is what frames it.
GENERAL_SYSTEM_PROMPT = """\
You are journal-agent, an assistant for engineers who study ML training systems (memory,
speed, optimizers, distributed training) while they code. You work inside the user's project
with the tools you are given. Read before you write; cite code as path:line; label every
number as measured, traced or estimated and show how you got it. Be concise in your replies;
be thorough in what you write to files."""


def environment_block(root: Path, model: str) -> str:
    """The short block every system prompt ends with: where, when, on what."""
    return (
        "<env>\n"
        f"Workspace root: {root}\n"
        f"Today's date: {date.today().isoformat()}\n"
        f"Platform: {platform.system().lower()} ({platform.machine()}), "
        f"Python {platform.python_version()}\n"
        f"Model: {model}\n"
        "</env>"
    )


def system_prompt(body: str, root: Path, model: str) -> str:
    return f"{body.strip()}\n\n{environment_block(root, model)}"


def tool_names(entries: list[str] | None) -> list[str] | None:
    """Tool names from a ``tools`` / ``allowed-tools`` list: ``Bash(git diff:*)`` → ``Bash``,
    ``mcp__journal-agent__JournalAppend`` → ``JournalAppend``, ``Agent`` → ``Task``."""
    if entries is None:
        return None
    out: list[str] = []
    for entry in entries:
        name = entry.split("(", 1)[0].strip()
        if name.startswith("mcp__"):
            # Claude Code names our MCP tools mcp__<server>__<Tool>; here they are built in.
            name = name.rsplit("__", 1)[-1]
        name = TOOL_ALIASES.get(name, name)
        if name and name not in out:
            out.append(name)
    return out


def select_tools(
    available: dict[str, Tool],
    allowed: list[str] | None,
    disallowed: Sequence[str] = (),
) -> tuple[dict[str, Tool], list[str]]:
    """The agent's tools (all when ``allowed`` is None) minus ``disallowed``, in a stable
    order; and the names it asked for that this host does not have (reported, not fatal:
    Claude Code ignores them too)."""
    wanted = tool_names(allowed)
    blocked = set(tool_names(list(disallowed)) or [])
    names = list(available) if wanted is None else wanted
    chosen = {n: available[n] for n in names if n in available and n not in blocked}
    # Task is not in any registry: the runner adds it (it needs the run's session).
    missing = [n for n in (wanted or []) if n not in available and n != "Task"]
    return chosen, missing
