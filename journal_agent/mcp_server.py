"""The journal and profiling tools over MCP (stdio), for Claude Code and other MCP hosts.

Claude Code starts it from the plugin's ``.mcp.json`` as ``journal-agent mcp``; the workspace
is the directory Claude Code runs in (or ``--root`` / ``JOURNAL_AGENT_ROOT``). Each tool is the
same :class:`~journal_agent.tools.base.Tool` our own runtime uses, so the schema the model sees
and the behaviour behind it are identical in both hosts. Tool calls run in a worker thread:
tracing a model takes seconds and must not stall the protocol loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from journal_agent import __version__

if TYPE_CHECKING:
    from journal_agent.workspace import Workspace

SERVER_NAME = "journal"
INSTRUCTIONS = (
    "journal-agent: append validated entries to learning_journal.md, search it, read "
    "and update learning_ledger.md (LedgerShow, LedgerUpdate), and estimate, trace or "
    "measure training memory and time (DeviceInfo and MemoryProfile measure this "
    "machine). Cite the record id each profiling tool returns "
    "as [m:<id>] beside the numbers you quote."
)
# What each tool says to an MCP host, where every request carries every schema (Claude Code
# 2.1.197 sends all of them with each request): the essentials of the tool's description. Our
# own runtime gives the model the whole description; the checks are the same behind both.
BRIEFS = {
    "JournalAppend": (
        "Append one entry to learning_journal.md, checked first (use it instead of Write or "
        "Edit): the sections (header with date, Context, The Key Question I Had); every "
        "`path:line` resolves; every [m:<id>] names a record whose values its numbers are; "
        "other numbers with units cite a record or show their calculation; no near-duplicate. "
        "On a problem nothing is written and each is listed: fix them and retry."
    ),
    "JournalSearch": (
        "Search learning_journal.md by words and meaning, best first (id, title, date, line, "
        "snippet); tags filters (#zero). related_to: your draft, to find entries to "
        "cross-reference or extend instead of appending a near-duplicate."
    ),
    "JournalCheck": (
        "Check every journal entry: code references (moved, stale with a diff, missing), "
        "citations, numbers, sections. fix=true first rewrites the moved references."
    ),
    "JournalInbox": (
        "The learning moments the hooks captured (★ Insight blocks, the files:lines edited, "
        "the [m:<id>] records created): list them, write entries from those the user picks, "
        "then mark them written."
    ),
    "LedgerShow": (
        "learning_ledger.md as JSON: knowledge by mastery level, actions, sessions, goals, "
        "insights, reviews due, and the mastery moves the reviews support. Read it before "
        "LedgerUpdate."
    ),
    "LedgerUpdate": (
        "Update learning_ledger.md (never with Write or Edit): operations apply all or none, "
        "every other line kept. add_session, archive_insight (each number "
        "needs a source: m:<id> or an entry id), add_item/move_item (level: mastered, "
        "developing, blind), add_action/tick_action (horizon), add_goal/tick_goal "
        "(match: words of the line), set_updated."
    ),
    "MemoryEstimate": (
        "GPU memory of a training step in closed form: weights, "
        "gradients, optimizer state by precision, ZeRO over gpus, activations, LoRA/QLoRA; "
        "time with gpu. Returns a record id to cite as [m:<id>]; fields as in "
        "`journal-agent estimate --help`."
    ),
    "MemoryTrace": (
        "Exact bytes of a training step traced under fake tensors (no GPU): peak "
        "by category and module, FLOPs, FSDP at any world size; fields as MemoryEstimate's. "
        "Returns a record id to cite as [m:<id>]. A workspace factory (package.module:fn) runs "
        "user code in the sandbox, permission-checked like Bash."
    ),
    "MemoryProfile": (
        "Measure real training steps on THIS machine (GPU, else CPU): peak per phase and step, "
        "times, tokens/s, beside the trace. For other hardware use MemoryTrace or "
        "MemoryEstimate. Returns a record id to cite as [m:<id>]; runs in the sandbox."
    ),
    "DeviceInfo": (
        "This machine's NVIDIA GPUs (memory, use, processes), driver, CUDA, torch, CPU and "
        "RAM, or that it has none; call it before MemoryProfile. Returns a record id."
    ),
}
# Fields most calls leave alone: named in one sentence after the brief rather than each given a
# schema entry (the tool still takes and checks them).
_SHAPE = ["params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "arch"]
_TUNING = ["fp32_grads", "foreach", "grads_kept", "offload_optimizer", "sequence_parallel"]
_TUNING += ["optimizer_in_bwd"]
_TUNING += ["dropout", "target", "mfu", "tokens", "counter", "expandable_segments"]
_TUNING += ["loss", "loss_chunks", "tied_head", "paged_optimizer", "double_quant"]
_TUNING += ["bnb_keeps_inputs", "float8", "float8_all_gather", "async_tp", "dpo"]
NAMED_ONLY = {
    "MemoryEstimate": _SHAPE + _TUNING,
    "MemoryTrace": _SHAPE + _TUNING,
    "MemoryProfile": ["fp32_grads", "foreach", "grads_kept"],
}
# Schema keywords an MCP host gets no use from: the model reads the brief, and the tool
# checks its input with the full model whatever the host sent.
_DROPPED = {"description", "default", "title", "additionalProperties", "maxLength", "minLength"}


def compact_schema(schema: Any) -> Any:
    """``schema`` without descriptions, defaults and bounds that say nothing to a model (a
    maximum of 10^7); enums, types and small bounds (zero: 0-3) stay."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact_schema(prop) for name, prop in value.items()}
        elif key in _DROPPED or (key.endswith(("imum", "Items")) and _large(value)):
            continue
        else:
            out[key] = compact_schema(value)
    return out


def _large(bound: object) -> bool:
    # Up to 50 a bound tells the model something (a search's limit, ZeRO's stages, warmup
    # steps); above it (64 virtual stages, 10^7 tokens) it only costs tokens in every request.
    return isinstance(bound, int | float) and not 1 < bound <= 50


def listing() -> list[dict[str, object]]:
    """Our tools as ``tools/list`` gives them: name, brief, compact input schema. The plugin's
    front serves the same list before the server runs (plugin_env/tools.json, generated from
    this by ``python -m journal_agent.plugin_env.tool_list``; a test holds them equal)."""
    from journal_agent.tools.registry import product_tools

    out: list[dict[str, object]] = []
    for tool in product_tools().values():
        schema = compact_schema(tool.input_schema())
        brief = BRIEFS.get(tool.name, tool.description)
        named = [n for n in NAMED_ONLY.get(tool.name, []) if n in schema["properties"]]
        if named:
            schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in named}
            brief += f" Also takes: {', '.join(named)}."
        out.append({"name": tool.name, "description": brief, "inputSchema": schema})
    return out


def build_server(ws: Workspace):
    import anyio
    import anyio.lowlevel
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.registry import make_context, product_tools

    tools = product_tools()
    ctx = make_context(ws)  # one workspace for the session: every call shares its stores
    listed = [types.Tool.model_validate(t) for t in listing()]

    async def list_tools(_ctx, _params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

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
        instructions=INSTRUCTIONS,
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
