"""``journal-agent mcp``: the MCP server the Claude Code plugin starts (stdio)."""

from __future__ import annotations

from journal_agent.cli._app import app
from journal_agent.cli._common import RootOption, open_workspace


@app.command("mcp")
def mcp_command(root: RootOption = None) -> None:
    """Serve the journal and profiling tools over MCP on stdin/stdout (for Claude Code)."""
    import sys

    from journal_agent.mcp_server import serve_stdio
    from journal_agent.project_trust import ignored_notice

    ws = open_workspace(root)
    # On stderr, which Claude Code keeps in the MCP server's log: the tools' sandbox and
    # permissions come from the settings files that count.
    if message := ignored_notice(ws.settings().ignored):
        print(message, file=sys.stderr)
    serve_stdio(ws)
