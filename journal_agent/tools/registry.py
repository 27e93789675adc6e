"""The built-in tools, and a ready-made context for running them in one workspace."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from journal_agent.tools.base import Tool, ToolContext
from journal_agent.tools.permissions import PermissionPolicy, Prompt
from journal_agent.tools.read_tracking import ReadTracker
from journal_agent.workspace import Workspace


def builtin_tools() -> dict[str, Tool]:
    """Every tool our runtime offers, by name: Claude Code's file and shell tools (Read, Write,
    Edit, Grep, Glob, Bash) followed by journal-agent's own (:func:`product_tools`)."""
    from journal_agent.tools.bash import Bash
    from journal_agent.tools.edit import Edit
    from journal_agent.tools.glob import Glob
    from journal_agent.tools.grep import Grep
    from journal_agent.tools.read import Read
    from journal_agent.tools.write import Write

    tools: list[Tool] = [Read(), Write(), Edit(), Grep(), Glob(), Bash()]
    return {**{tool.name: tool for tool in tools}, **product_tools()}


def product_tools() -> dict[str, Tool]:
    """journal-agent's own tools: the journal and the profiling toolkit. The MCP server offers
    exactly these to Claude Code, which has its own file and shell tools."""
    from journal_agent.tools.journal_append import JournalAppend
    from journal_agent.tools.journal_check import JournalCheck
    from journal_agent.tools.journal_inbox import JournalInbox
    from journal_agent.tools.journal_search import JournalSearch
    from journal_agent.tools.ledger import LedgerShow, LedgerUpdate
    from journal_agent.tools.memory_estimate import MemoryEstimate
    from journal_agent.tools.memory_profile import DeviceInfo, MemoryProfile
    from journal_agent.tools.memory_trace import MemoryTrace

    tools: list[Tool] = [
        JournalAppend(),
        JournalSearch(),
        JournalCheck(),
        JournalInbox(),
        LedgerShow(),
        LedgerUpdate(),
        MemoryEstimate(),
        MemoryTrace(),
        MemoryProfile(),
        DeviceInfo(),
    ]
    return {tool.name: tool for tool in tools}


def make_context(
    where: Workspace | Path,
    *,
    mode: str | None = None,
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
    prompt: Prompt | None = None,
) -> ToolContext:
    """A context for one run: the permission policy from the settings files plus ``allow`` /
    ``deny`` / ``mode`` overrides, and fresh read tracking.

    ``prompt`` answers "ask" decisions (see :func:`journal_agent.tools.permissions.tty_prompt`);
    without it they are denied.
    """
    ws = where if isinstance(where, Workspace) else Workspace.at(where)
    policy = PermissionPolicy.from_settings(
        ws.root, mode=mode, allow=allow, deny=deny, prompt=prompt
    )
    return ToolContext.of(ws, policy, ReadTracker())
