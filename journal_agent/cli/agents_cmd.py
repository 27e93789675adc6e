"""``journal-agent agents`` and ``journal-agent commands``: what definitions were found, where."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, cell, echo, print_json, resolve_root
from journal_agent.errors import UserError

VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Also show definitions that higher-precedence ones hide."),
]
StrictOption = Annotated[
    bool, typer.Option("--strict", help="Exit non-zero when any definition file is malformed.")
]
ApproveOption = Annotated[
    str | None,
    typer.Option(
        "--approve",
        metavar="NAME",
        help="Approve what the project's file NAME grants as it is now (allowed-tools of a "
        "command, permissionMode of an agent); read it first. Asks you to type yes on your "
        "terminal; no tool call can approve.",
    ),
]


def _approve(kind, definition, root: Path) -> None:
    from journal_agent.approvals import approve

    granted = approve(kind, definition, root)
    what = ", ".join(granted) if granted else "nothing"
    echo(
        f"approved {_rel(definition.source, root)}: {what}; once the file changes, its grants "
        f"need `journal-agent {kind} --approve {definition.name}` again."
    )


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _report(
    kind: str, discovery, root: Path, rows, columns, verbose: bool, as_json: bool, strict: bool
) -> None:
    errors = [{"file": str(e.path), "line": e.line, "message": e.message} for e in discovery.errors]
    shadowed = [
        {
            "name": hidden.name,
            "source": _rel(hidden.source, root),
            "origin": hidden.origin,
            "shadowed_by": _rel(winner.source, root),
        }
        for hidden, winner in discovery.shadowed
    ]
    if as_json:  # plain JSON: rich is imported for the table only
        print_json({kind: rows, "shadowed": shadowed, "errors": errors})
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from journal_agent.terminal_text import visible

        out = Console()
        table = Table(title=f"{kind} ({len(rows)})", title_justify="left")
        for col in columns:
            table.add_column(col)
        for row in rows:
            table.add_row(*(cell(row[c] if row[c] is not None else "—") for c in columns))
        out.print(table)
        if verbose and shadowed:
            out.print("[bold]shadowed[/bold] (a project file beats a user file beats the plugin):")
            for s in shadowed:
                out.print(
                    cell(
                        f"  {s['name']}: {s['source']} ({s['origin']}) hidden by {s['shadowed_by']}"
                    )
                )
        err = Console(stderr=True)
        for e in discovery.errors:
            err.print(
                f"[red]error:[/red] {escape(visible(str(e)))}", highlight=False, soft_wrap=True
            )
    if strict and discovery.errors:
        raise typer.Exit(1)


@app.command("agents")
def agents_command(
    root: RootOption = None,
    verbose: VerboseOption = False,
    as_json: JsonOption = False,
    strict: StrictOption = False,
    approve: ApproveOption = None,
) -> None:
    """List agent definitions: name, source, model, tools, an unapproved permissionMode."""
    from journal_agent.approvals import agent_mode
    from journal_agent.definitions import discover_agents, load_agent

    root = resolve_root(root)
    if approve:
        _approve("agents", load_agent(approve, root), root)
        return
    found = discover_agents(root)
    rows = [
        {
            "name": a.name,
            "origin": a.origin,
            "source": _rel(a.source, root),
            "model": a.model,
            "tools": ", ".join(a.tools) if a.tools is not None else "all",
            "not approved": ", ".join(agent_mode(a, root).ignored) or None,
            "description": a.description.splitlines()[0][:80],
        }
        for a in found.found.values()
    ]
    _report(
        "agents",
        found,
        root,
        rows,
        ["name", "origin", "model", "tools", "not approved", "source"],
        verbose,
        as_json,
        strict,
    )


def _run_hint(name: str) -> str:
    return 'learn "…"' if name == "learn" else f'command {name} "…"'


@app.command("commands")
def commands_command(
    root: RootOption = None,
    verbose: VerboseOption = False,
    as_json: JsonOption = False,
    strict: StrictOption = False,
    eject: Annotated[
        str | None,
        typer.Option(
            "--eject",
            metavar="NAME",
            help="Copy command NAME into .claude/commands/ to customise it.",
        ),
    ] = None,
    approve: ApproveOption = None,
) -> None:
    """List slash-command definitions: name, source, model, allowed tools, unapproved ones."""
    from journal_agent.approvals import command_grants
    from journal_agent.definitions import discover_commands, load_command

    root = resolve_root(root)
    if approve:
        _approve("commands", load_command(approve, root), root)
        return
    if eject:
        cmd = load_command(eject, root)
        target = root / ".claude" / "commands" / Path(*cmd.name.split(":")).with_suffix(".md")
        from journal_agent import confined

        # A new file, never over anything and never through a link (a clone's committed
        # `.claude/commands -> ~/somewhere` is refused in one sentence).
        if not confined.create(root, target, Path(cmd.source).read_bytes()):
            raise UserError(f"{_rel(target, root)} already exists; edit it directly.")
        # The baseline of the feedback loop: whatever hand edits the copy next (an agent's
        # Edit, Claude Code's, the user's editor), `feedback` diffs against this.
        from journal_agent.tools._file_versions import keep_previous

        keep_previous(root, target, target.read_bytes())
        name = cmd.name.split(":")[-1] if cmd.origin == "plugin" else cmd.name
        echo(
            f"copied {cmd.source} → {_rel(target, root)}; it now takes precedence: run it as "
            f"`journal-agent {_run_hint(name)}` here and /{name} in Claude Code "
            f"(/{cmd.name if ':' in cmd.name else 'journal-agent:' + name} stays the plugin's "
            "original)."
        )
        return
    found = discover_commands(root)
    rows = [
        {
            "name": c.name,
            "origin": c.origin,
            "source": _rel(c.source, root),
            "model": c.model or "inherit",
            "tools": ", ".join(c.allowed_tools) if c.allowed_tools else "—",
            "not approved": ", ".join(command_grants(c, root).ignored) or None,
            "argument_hint": c.argument_hint,
            "description": c.description[:80],
        }
        for c in found.found.values()
    ]
    _report(
        "commands",
        found,
        root,
        rows,
        ["name", "origin", "model", "tools", "not approved", "source"],
        verbose,
        as_json,
        strict,
    )
