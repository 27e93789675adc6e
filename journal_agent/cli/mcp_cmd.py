"""``journal-agent mcp``: the MCP server the Claude Code plugin starts (stdio)."""

from __future__ import annotations

from journal_agent.cli._app import app
from journal_agent.cli._common import RootOption, open_workspace


@app.command("mcp")
def mcp_command(root: RootOption = None) -> None:
    """Serve the journal and profiling tools over MCP on stdin/stdout (for Claude Code)."""
    from journal_agent.mcp_server import serve_stdio

    serve_stdio(open_workspace(root))
