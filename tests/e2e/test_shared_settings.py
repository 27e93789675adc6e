"""`journal-agent mcp` starts under the settings Claude Code shares with it.

Claude Code launches our MCP server with the user's ~/.claude/settings.json and the project's
.claude/settings*.json in force; values only Claude Code defines must not stop the server.
Runs without the `claude` CLI (the real MCP client over stdio).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest


async def _estimate(project: Path, home: Path) -> str:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "journal_agent", "mcp"],
        cwd=str(project),
        env={"HOME": str(home)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("MemoryEstimate", {"model": "llama-7b", "zero": 2})
        assert not result.is_error, result.content[0].text
        return result.content[0].text


@pytest.mark.parametrize(
    "permissions",
    [
        {"allow": ["mcp__plugin_journal-agent_journal__*"]},  # Claude Code's MCP wildcard
        {"deny": ["mcp__github__*"], "ask": ["mcp__plugin_journal-agent_journal__*"]},
        {"defaultMode": "auto"},  # a Claude Code mode our runtime has no classifier for
    ],
    ids=["mcp-wildcard-allow", "mcp-wildcard-deny-ask", "auto-mode"],
)
def test_mcp_server_starts_under_claude_code_only_settings(tmp_path, permissions):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps({"permissions": permissions}))
    text = anyio.run(_estimate, project, home)
    record = re.search(r"\[m:(est-[0-9a-f]{8})\]", text)
    assert record, text
    assert (project / ".journal" / "measurements" / f"{record.group(1)}.json").is_file()


def test_a_bare_wildcard_rule_is_still_rejected(tmp_path):
    """Only MCP names take a `*`: `*` alone would silently allow every tool."""
    from journal_agent.errors import UserError
    from journal_agent.tools.permissions import PermissionPolicy

    with pytest.raises(UserError, match="not of the form"):
        PermissionPolicy(tmp_path, allow=["*"])
    with pytest.raises(UserError, match="not of the form"):
        PermissionPolicy(tmp_path, deny=["Bash*"])


def test_mcp_wildcard_rules_match_only_their_server(tmp_path):
    from journal_agent.tools.permissions import PermissionPolicy

    policy = PermissionPolicy(tmp_path, deny=["mcp__github__*"], mode="bypassPermissions")
    assert not policy.check("mcp__github__create_issue").allowed
    assert policy.check("mcp__journal__search").allowed
