"""The plugin's MCP server, driven by the real MCP client over stdio, as Claude Code drives it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio


async def _session(root: Path, home: Path, work):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "journal_agent", "mcp"],
        cwd=str(root),
        env={"HOME": str(home)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


def test_mcp_lists_our_tools_and_runs_them(project, home):
    async def work(session):
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        estimate = await session.call_tool(
            "MemoryEstimate",
            {
                "model": "llama-7b",
                "precision": "mixed",
                "optimizer": "adamw",
                "gpus": 2,
                "zero": 2,
                "gpu_mem": 40,
            },
        )
        bad = await session.call_tool("MemoryEstimate", {"model": "llama-7b", "zero": 9})
        unknown = await session.call_tool("Nope", {})
        return tools, estimate, bad, unknown

    tools, estimate, bad, unknown = anyio.run(_session, project, home, work)
    assert set(tools) == {
        "JournalAppend",
        "JournalSearch",
        "JournalCheck",
        "JournalInbox",
        "LedgerShow",
        "LedgerUpdate",
        "MemoryEstimate",
        "MemoryTrace",
        "MemoryProfile",
        "DeviceInfo",
    }
    # The operations reach MCP hosts as one flat schema (no $ref to resolve).
    assert "$defs" not in str(tools["LedgerUpdate"].input_schema)
    assert tools["MemoryEstimate"].input_schema["properties"]["zero"]["maximum"] == 3
    assert not estimate.is_error
    text = estimate.content[0].text
    record = re.search(r"\[m:(est-[0-9a-f]{8})\]", text) or re.search(r"(est-[0-9a-f]{8})", text)
    assert record, text
    # The record the agent is told to cite exists in the project the server works in.
    assert (project / ".journal" / "measurements" / f"{record.group(1)}.json").is_file()
    assert bad.is_error and "zero" in bad.content[0].text
    assert unknown.is_error and "MemoryEstimate" in unknown.content[0].text
