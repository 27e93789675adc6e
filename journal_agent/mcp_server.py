"""The journal and profiling tools over MCP (stdio), for Claude Code and other MCP hosts.

Claude Code starts it from the plugin's ``.mcp.json`` as ``journal-agent mcp``; the workspace
is the directory Claude Code runs in (or ``--root`` / ``JOURNAL_AGENT_ROOT``). Each tool is the
same :class:`~journal_agent.tools.base.Tool` our own runtime uses, so the schema the model sees
and the behaviour behind it are identical in both hosts. Tool calls run in a worker thread:
tracing a model takes seconds and must not stall the protocol loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal_agent import __version__

if TYPE_CHECKING:
    from journal_agent.workspace import Workspace

SERVER_NAME = "journal"


def build_server(ws: Workspace):
    import anyio
    import anyio.lowlevel
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.registry import make_context, product_tools

    tools = product_tools()
    ctx = make_context(ws)  # one workspace for the session: every call shares its stores

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
        # The tool reports from threads of its own: hand them this loop's token.
        session = getattr(_ctx, "session", None)
        token = anyio.lowlevel.current_token()

        def progress(done: float, total: float | None, message: str) -> None:
            if session is not None:
                anyio.from_thread.run(session.report_progress, done, total, message, token=token)

        call_ctx = ToolContext.of(ws, ctx.policy, ctx.reads, progress)
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


def serve_stdio(ws: Workspace) -> None:
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    server = build_server(ws)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            # The transport hands a line it cannot parse to the session as an exception, which
            # the session drops: the client would wait forever. Answer it as JSON-RPC says.
            ours_writer, ours = create_context_streams[SessionMessage | Exception](0)

            async def forward() -> None:
                async with ours_writer:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(SessionMessage(_parse_error(item)))
                        elif _id_dropped(item.message):
                            await write_stream.send(SessionMessage(_bad_id()))
                        else:
                            await ours_writer.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(forward)
                await server.run(ours, write_stream, server.create_initialization_options())
                tg.cancel_scope.cancel()

    anyio.run(main)


def _id_dropped(message) -> bool:
    """A request whose ``id`` was neither a string nor an integer (``true``, ``1.5``) parses as
    a *notification* — the id is dropped — and would get no answer at all. Every MCP
    notification's method starts with ``notifications/``; any other method without an id was
    meant as a request."""
    import mcp_types as types

    return isinstance(message, types.JSONRPCNotification) and not message.method.startswith(
        "notifications/"
    )


def _bad_id():
    import mcp_types as types

    return types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(
            code=-32600,
            message="Invalid Request: a request's id must be a string or an integer (not true, "
            "1.5 or null); send it again with one.",
        ),
    )


def _parse_error(exc: Exception):
    """The JSON-RPC error for a line that is not JSON (-32700) or not a JSON-RPC message
    (-32600); ``id`` is null, since the request's id could not be read."""
    import mcp_types as types
    from pydantic import ValidationError

    not_json = isinstance(exc, ValidationError) and any(
        e.get("type") == "json_invalid" for e in exc.errors()
    )
    code, what = (
        (-32700, "Parse error: the line is not valid JSON")
        if not_json
        else (-32600, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message")
    )
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(code=code, message=f"{what}; send one JSON-RPC object per line."),
    )
