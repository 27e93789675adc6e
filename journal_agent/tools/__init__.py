"""Tools the model calls: Claude Code's Read, Write, Edit, Grep, Glob and Bash, confined to a
workspace and checked against permission rules.

``builtin_tools()`` and ``make_context()`` are loaded on first use, so importing this package
costs only the small contract module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult

if TYPE_CHECKING:
    from journal_agent.tools.registry import builtin_tools, make_context

__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult", "builtin_tools", "make_context"]


def __getattr__(name: str) -> Any:
    if name in ("builtin_tools", "make_context"):
        from journal_agent.tools import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'journal_agent.tools' has no attribute {name!r}")
