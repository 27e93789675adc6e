"""``journal-agent tool NAME 'JSON'``: run one tool as the model would; ``journal-agent tools``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    open_workspace,
    print_json,
    sandbox_notice,
)
from journal_agent.errors import UserError

# Every tool `tool` runs, by name, as builtin_tools() has them (a test holds the two together:
# the registry is not imported for --help).
TOOL_NAMES = (
    *("Read", "Write", "Edit", "Grep", "Glob", "Bash", "JournalAppend", "JournalSearch"),
    *("JournalCheck", "JournalInbox", "LedgerShow", "LedgerUpdate", "MemoryEstimate"),
    *("MemoryTrace", "MemoryProfile", "DeviceInfo"),
)


@app.command("tool")
def tool_command(
    name: Annotated[
        str | None,
        typer.Argument(
            help=f"The tool to run: {', '.join(TOOL_NAMES)} (`journal-agent tools` lists their "
            "inputs)."
        ),
    ] = None,
    input_json: Annotated[
        str | None,
        typer.Argument(
            metavar="JSON",
            help='The tool input as one JSON object, e.g. \'{"pattern": "TODO"}\'; '
            "'-' reads it from stdin.",
        ),
    ] = None,
    root: RootOption = None,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", help="An extra allow rule, e.g. 'Bash(git diff:*)' (repeatable)."),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option("--deny", help="An extra deny rule, e.g. 'Read(./secrets/**)' (repeatable)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="Permission mode: default, acceptEdits, plan, bypassPermissions, dontAsk.",
        ),
    ] = None,
    list_tools: Annotated[
        bool, typer.Option("--list", help="List the tools and their inputs instead.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run one tool and print its result exactly as the model would see it.

    Exit code 0 on success, 1 when the tool reports an error (denied, bad input, failure).

    Example: journal-agent tool Grep '{"pattern": "def main", "output_mode": "content"}'
    """
    if list_tools or name is None:
        if name is None and not list_tools:
            raise UserError(
                "give a tool name and its JSON input, e.g. journal-agent tool Glob "
                '\'{"pattern": "**/*.py"}\', or use --list to see the tools.'
            )
        _list(as_json)
        return

    from journal_agent.tools import builtin_tools, make_context
    from journal_agent.tools.permissions import tty_prompt

    tools = builtin_tools()
    tool = tools.get(name) or next((t for n, t in tools.items() if n.lower() == name.lower()), None)
    if tool is None:
        raise UserError(f"unknown tool {name!r}; the tools are {', '.join(tools)}.")
    params = _parse_input(input_json, tool.name)
    ws = open_workspace(root)
    if tool.name == "Bash":
        sandbox_notice(ws)
    ctx = make_context(
        ws,
        mode=mode,
        allow=allow or (),
        deny=deny or (),
        prompt=tty_prompt() if input_json != "-" else None,
    )
    if tool.name in _TRACKED:
        # Each `tool` call is a run of its own: what `tool Read` read is kept beside the
        # journal, so a later `tool Edit`/`tool Write` of the same file can go through.
        from journal_agent.tools.read_state import PersistentReadTracker

        ctx.reads = PersistentReadTracker(ctx.root)
    from journal_agent.runtime.dispatch import ToolCall, run_one

    # As the agent loop runs it (dispatch.run_one), so what is printed is what the model gets:
    # the journal's line on cited code it touched included, an over-long result cut.
    result = run_one({tool.name: tool}, ctx, ToolCall("cli", tool.name, params)).result
    echo(result.content)
    if result.is_error:
        raise typer.Exit(1)


_TRACKED = frozenset({"Read", "Write", "Edit"})


@app.command("tools")
def tools_command(as_json: JsonOption = False) -> None:
    """List the built-in tools and their inputs (--json: the definitions the model gets)."""
    _list(as_json)


def _parse_input(raw: str | None, tool_name: str) -> dict[str, Any]:
    if raw is None:
        raise UserError(
            f"give {tool_name}'s input as a JSON object, e.g. journal-agent tool {tool_name} "
            f"'{_example(tool_name)}'."
        )
    text = sys.stdin.read() if raw == "-" else raw
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"the input is not valid JSON ({exc.msg} at column {exc.colno}); give one object, "
            f"e.g. '{_example(tool_name)}' (single quotes around it in the shell)."
        ) from None
    if not isinstance(data, dict):
        raise UserError(
            f"the input must be a JSON object, not {type(data).__name__}; e.g. "
            f"'{_example(tool_name)}'."
        )
    return data


def _example(tool_name: str) -> str:
    return {
        "Read": '{"file_path": "README.md"}',
        "Write": '{"file_path": "notes.md", "content": "hello\\n"}',
        "Edit": '{"file_path": "notes.md", "old_string": "hello", "new_string": "hi"}',
        "Grep": '{"pattern": "TODO", "output_mode": "content"}',
        "Glob": '{"pattern": "**/*.py"}',
        "Bash": '{"command": "git status"}',
    }.get(tool_name, "{}")


def _list(as_json: bool) -> None:
    from journal_agent.tools import builtin_tools

    tools = builtin_tools()
    if as_json:
        print_json([tool.definition() for tool in tools.values()])
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"tools ({len(tools)})", title_justify="left")
    table.add_column("name", style="bold")
    table.add_column("input")
    table.add_column("summary")
    for tool in tools.values():
        schema = tool.input_schema()
        required = set(schema.get("required", []))
        fields = ", ".join(f + ("" if f in required else "?") for f in schema.get("properties", {}))
        table.add_row(tool.name, fields, tool.description.splitlines()[0])
    Console().print(table)
