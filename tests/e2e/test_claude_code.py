"""The plugin inside the real Claude Code CLI, offline, against a scripted model on 127.0.0.1.

`claude plugin validate .` is covered in tests/foundation/test_plugin.py. Here Claude Code
installs the plugin, offers our agents, commands and MCP tools to the model, runs our MCP
server when the model calls a tool, and expands our slash command.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from journal_agent.testing import reply, tool_use
from tests.e2e.claude_helpers import (
    REPO,
    VENV_BIN,
    called,
    needs_claude,
    run_claude,
    texts,
    tool_names,
    tool_results,
)

pytestmark = [needs_claude, pytest.mark.slow]

# Claude Code names a plugin's MCP tools mcp__plugin_<plugin>_<server>__<tool>.
MCP_PREFIX = "mcp__plugin_journal-agent_journal__"
ESTIMATE = MCP_PREFIX + "MemoryEstimate"
ESTIMATE_ARGS = {
    "model": "llama-7b",
    "precision": "mixed",
    "optimizer": "adamw",
    "gpus": 2,
    "zero": 2,
    "gpu_mem": 40,
}


@pytest.fixture(autouse=True)
def _journal_agent_installed() -> None:
    if not (VENV_BIN / "journal-agent").exists():
        pytest.skip(f"the journal-agent console script is not installed in {VENV_BIN}")


def test_marketplace_install_and_details_list_our_components(claude_print, plugin_clone):
    home, project = claude_print.home, claude_print.project

    added = run_claude(["plugin", "marketplace", "add", str(plugin_clone)], cwd=project, home=home)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "Successfully added marketplace: journal-agent" in added.stdout

    # Claude Code copies the whole marketplace directory into the home.
    installed = run_claude(
        ["plugin", "install", "journal-agent@journal-agent"], cwd=project, home=home, timeout=300
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Successfully installed plugin: journal-agent@journal-agent" in installed.stdout

    details = run_claude(["plugin", "details", "journal-agent"], cwd=project, home=home)
    assert details.returncode == 0, details.stdout + details.stderr
    inventory = " ".join(details.stdout.split())
    # Claude Code lists plugin commands as skills.
    assert "Skills (2) end-session, learn" in inventory, details.stdout
    assert "Agents (2) learning-journal, training-optimization" in inventory, details.stdout
    assert "MCP servers (1) journal" in inventory, details.stdout

    # A session without --plugin-dir uses the installed copy: same names, same MCP server.
    run = claude_print(
        "Estimate llama-7b memory.", _estimate_flow, "--allowedTools", ESTIMATE, plugin_dir=False
    )
    assert "journal-agent:learning-journal" in "\n".join(texts(run.main_requests[0]))
    assert "[m:est-" in tool_results(run.main_requests[-1])[ESTIMATE]


def _estimate_flow(body: dict[str, Any]) -> Any:
    """Wait for MCP servers if our tools are not offered yet, call MemoryEstimate, then stop."""
    offered, done = [t["name"] for t in body.get("tools", [])], called(body)
    if ESTIMATE in done:
        return reply("Done.")
    if ESTIMATE in offered:
        return reply(tool_use(ESTIMATE, ESTIMATE_ARGS))
    if "WaitForMcpServers" in offered and done.count("WaitForMcpServers") < 6:
        # Claude Code connects MCP servers in the background; the first request may precede it,
        # and one wait can end before our server (a Python start) is up on a loaded machine.
        return reply(tool_use("WaitForMcpServers", {}))
    return reply("Side request.")


def test_model_sees_our_agents_commands_and_mcp_tools_and_claude_code_runs_our_server(
    claude_print,
):
    run = claude_print(
        "How much memory does llama-7b need on 2 GPUs with ZeRO-2?",
        _estimate_flow,
        "--allowedTools",
        ESTIMATE,
    )
    first = run.main_requests[0]

    # Our agents are offered to the Agent tool under the plugin's namespace.
    agents = next(t for t in texts(first) if "Available agent types for the Agent tool" in t)
    assert "- journal-agent:learning-journal: Record comprehensive learning insights" in agents
    assert "- journal-agent:training-optimization: Specialized agent for training loops" in agents
    # Our commands are offered as skills.
    skills = "\n".join(texts(first))
    assert "- journal-agent:learn: Record a learning insight" in skills
    assert "- journal-agent:end-session: End the study session" in skills

    # Our MCP server's tools — exactly the registry's product tools — under Claude Code's naming.
    from journal_agent.tools.registry import product_tools

    last = run.main_requests[-1]
    ours = sorted(n for n in tool_names(last) if n.startswith(MCP_PREFIX))
    assert ours == sorted(MCP_PREFIX + name for name in product_tools())
    assert MCP_PREFIX + "LedgerUpdate" in ours and MCP_PREFIX + "MemoryProfile" in ours
    schema = next(t for t in last.body["tools"] if t["name"] == ESTIMATE)["input_schema"]
    assert schema["properties"]["zero"]["maximum"] == 3

    # Claude Code ran the tool through `journal-agent mcp`; the estimate came back to the model.
    assert run.result["permission_denials"] == []
    result = tool_results(last)[ESTIMATE]
    assert "llama-7b" in result and "ZeRO-2" in result
    assert re.search(r"Weights \(fp16/bf16\)\s+13\.\d\d GB", result), result
    record = re.search(r"\[m:(est-[0-9a-f]{8})\]", result)
    assert record, result
    # The record the model is told to cite exists in the project Claude Code runs in.
    assert (
        claude_print.project / ".journal" / "measurements" / f"{record.group(1)}.json"
    ).is_file()
    # The server's instructions reach the model too.
    assert any("Cite the record id" in t for t in texts(last))


def test_without_allowed_tools_print_mode_denies_our_mcp_tool(claude_print):
    """Non-interactive runs need --allowedTools (root cannot use --dangerously-skip-permissions)."""
    run = claude_print("Estimate llama-7b memory.", _estimate_flow)
    denied = [d["tool_name"] for d in run.result["permission_denials"]]
    assert denied == [ESTIMATE]
    assert not (claude_print.project / ".journal" / "measurements").exists()


def test_a_wildcard_allow_rule_in_claude_code_settings_lets_our_tools_run(claude_print):
    """Claude Code and our MCP server read the same ~/.claude/settings.json: a rule only Claude
    Code defines (the MCP wildcard) must not stop `journal-agent mcp` from starting."""
    settings = claude_print.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": {"allow": [MCP_PREFIX + "*"]}}))
    run = claude_print("Estimate llama-7b memory.", _estimate_flow)
    assert run.result["permission_denials"] == []
    assert "[m:est-" in tool_results(run.main_requests[-1])[ESTIMATE]
    assert list((claude_print.project / ".journal" / "measurements").glob("est-*.json"))


def test_learning_journal_agent_runs_as_a_claude_code_subagent(claude_print):
    def flow(body: dict[str, Any]) -> Any:
        system = body.get("system", "")
        if isinstance(system, list):
            system = "\n".join(b.get("text", "") for b in system)
        if "specialized learning journal assistant" in system:
            return reply("Recorded the ZeRO-2 entry.")
        if "Agent" not in [t["name"] for t in body.get("tools", [])]:
            return reply("Side request.")
        if "Agent" in called(body):
            return reply("Done.")
        return reply(
            tool_use(
                "Agent",
                {
                    "description": "Record ZeRO-2 insight",
                    "prompt": "Record why ZeRO-2 shards gradients.",
                    "subagent_type": "journal-agent:learning-journal",
                },
            )
        )

    run = claude_print("Record why ZeRO-2 shards gradients in my journal.", flow)
    sub = [r for r in run.requests if "specialized learning journal assistant" in r.system_text]
    assert sub, "the learning-journal sub-agent never sent a request"
    # The agent's frontmatter is honoured: haiku, and only the tools it lists (Claude Code
    # 2.1.197 has no Grep/Glob tools, so those two are dropped; our MCP tools, listed by their
    # Claude Code names, appear once the server has connected).
    assert "haiku" in sub[0].body["model"]
    ours = {
        f"mcp__plugin_journal-agent_journal__{n}"
        for n in (
            "JournalAppend",
            "JournalSearch",
            "MemoryEstimate",
            "MemoryTrace",
            "MemoryProfile",
            "DeviceInfo",
        )
    }
    assert set(tool_names(sub[0])) <= {"Read", "Write", "Edit", "Bash", "Grep", "Glob"} | ours
    assert {"Read", "Write", "Edit", "Bash"} <= set(tool_names(sub[0]))
    assert "Record why ZeRO-2 shards gradients." in "\n".join(texts(sub[0], "user"))
    # The main conversation gets the sub-agent's answer back.
    assert "Recorded the ZeRO-2 entry." in tool_results(run.main_requests[-1])["Agent"]


def test_learn_command_expands_our_text_with_the_arguments(claude_print):
    run = claude_print(
        "/journal-agent:learn why ZeRO-2 shards gradients", lambda body: reply("Noted.")
    )
    first = run.main_requests[0]
    user = texts(first, "user")
    assert "<command-name>/journal-agent:learn</command-name>" in "\n".join(user)
    body = next(t for t in user if "maintain a comprehensive learning journal" in t)
    # $ARGUMENTS substituted, the user's characters intact.
    assert 'Take the concept or question from the arguments: "why ZeRO-2 shards gradients"' in body
    assert "## 🎓 Core Teaching Philosophy" in body
    assert "$ARGUMENTS" not in body
    source = (REPO / "commands" / "learn.md").read_text(encoding="utf-8")
    assert source.split("---", 2)[2].strip()[:200] in body


def test_an_ejected_command_is_what_slash_learn_runs(claude_print, cli):
    """After `commands --eject learn` and an edit of the copy, Claude Code's /learn runs the
    improved project file; /journal-agent:learn stays the plugin's original (issue #24)."""
    project = claude_print.project
    assert cli("commands", "--eject", "learn", cwd=project, home=claude_print.home).returncode == 0
    learn = project / ".claude" / "commands" / "learn.md"
    marker = "Always end with one practice exercise (the user asked for it)."
    learn.write_text(learn.read_text(encoding="utf-8") + f"\n{marker}\n", encoding="utf-8")
    run = claude_print("/learn why ZeRO-2 shards gradients", lambda body: reply("Noted."))
    user = "\n".join(texts(run.main_requests[0], "user"))
    assert "<command-name>/learn</command-name>" in user and marker in user
    plugin = claude_print(
        "/journal-agent:learn why ZeRO-2 shards gradients", lambda body: reply("Noted.")
    )
    original = "\n".join(texts(plugin.main_requests[0], "user"))
    assert "maintain a comprehensive learning journal" in original and marker not in original


@pytest.mark.parametrize(
    ("body", "arguments"),
    [
        ("first=$ARGUMENTS[0] second=$1 all=$ARGUMENTS missing=$ARGUMENTS[5] end\n", '"a b" c'),
        ("No placeholder here.\n", 'x "y z"'),
    ],
    ids=["placeholders", "appended"],
)
def test_our_command_expansion_matches_claude_codes(claude_print, body, arguments):
    """Our runtime expands a command the way Claude Code does (same words, same order)."""
    from journal_agent.definitions import expand_command, load_command

    commands = claude_print.project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "probe.md").write_text(f"---\ndescription: probe\n---\n{body}")
    run = claude_print(f"/probe {arguments}", lambda _: reply("Noted."))
    user = texts(run.main_requests[0], "user")
    assert f"<command-args>{arguments}</command-args>" in "\n".join(user)
    theirs = user[-1]
    ours = expand_command(
        load_command("probe", claude_print.project, claude_print.home),
        arguments,
        claude_print.project,
    )
    # Claude Code puts one more blank line before an appended "ARGUMENTS:" line.
    assert theirs.split() == ours.split(), (theirs, ours)
