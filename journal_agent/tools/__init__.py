"""Tools the model calls: Claude Code's Read, Write, Edit, Grep, Glob and Bash, confined to a
workspace and checked against permission rules.

``builtin_tools()`` and ``make_context()`` are loaded on first use, so importing this package
costs only the small contract module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from profiling._lazy import lazy_exports

if TYPE_CHECKING:
    from journal_agent.tools.registry import builtin_tools, make_context

__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult", "builtin_tools", "make_context"]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "builtin_tools": "journal_agent.tools.registry",
        "make_context": "journal_agent.tools.registry",
    },
)
