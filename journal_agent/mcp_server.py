"""The journal and profiling tools over MCP (stdio), for Claude Code and other MCP hosts.

Claude Code starts it from the plugin's ``.mcp.json`` as ``journal-agent mcp``; the workspace
is the directory Claude Code runs in (or ``--root`` / ``JOURNAL_AGENT_ROOT``). Each tool is the
same :class:`~journal_agent.tools.base.Tool` our own runtime uses, so the schema the model sees
and the behaviour behind it are identical in both hosts. Tool calls run in a worker thread:
tracing a model takes seconds and must not stall the protocol loop.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from journal_agent import __version__

SERVER_NAME = "journal"


def build_server(root: Path):
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from journal_agent.tools.registry import make_context, product_tools

    tools = product_tools()
    ctx = make_context(root)

    async def list_tools(_ctx, _params) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.input_schema())
                for t in tools.values()
            ]
        )

    async def call_tool(_ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            text = f"Unknown tool '{params.name}'; available: {', '.join(sorted(tools))}."
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        # Long tools (MemoryProfile) report progress; the client sees it when it asked for it.
        session = getattr(_ctx, "session", None)

        def progress(done: float, total: float | None, message: str) -> None:
            if session is not None:
                anyio.from_thread.run(session.report_progress, done, total, message)

        call_ctx = dataclasses.replace(ctx, extras={**ctx.extras, "progress": progress})
        result = await anyio.to_thread.run_sync(tool.call, call_ctx, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.content)],
            is_error=result.is_error,
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "journal-agent: append validated entries to learning_journal.md, search it, read "
            "and update learning_ledger.md (LedgerShow, LedgerUpdate), and estimate, trace or "
            "measure training memory and time (DeviceInfo and MemoryProfile measure this "
            "machine). Cite the record id each profiling tool returns "
            "as [m:<id>] beside the numbers you quote."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(root: Path) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(root)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
