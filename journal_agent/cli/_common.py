"""Options and output helpers shared by the CLI modules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from journal_agent.errors import UserError
from journal_agent.terminal_text import json_visible, visible

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.text import Text

    from journal_agent.workspace import Workspace

# Optional: None means the current directory (resolve_root), so commands can default to it.
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        envvar="JOURNAL_AGENT_ROOT",
        help="The workspace (project) root. Default: the current directory.",
        show_default=False,
    ),
]


# One --json for every command that has one.
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON instead of text (for scripts and agents).")
]


def resolve_root(root: Path | None) -> Path:
    path = (root or Path.cwd()).expanduser()
    if not path.is_dir():
        raise UserError(f"workspace root {path} is not a directory; pass an existing --root.")
    return path.resolve()


def open_workspace(root: Path | None) -> Workspace:
    """The workspace a command works in, built once from its --root: it carries the root and
    hands out the stores (journal, ledger, review, inbox, index, records) to what it calls."""
    from journal_agent.workspace import Workspace

    return Workspace(resolve_root(root))


def forward_root(ctx: typer.Context, root: Path | None) -> bool:
    """In a command group's callback: whether a subcommand follows, after handing it the
    group's ``--root`` (``ledger --root DIR check``: click parses the subcommand's options
    after the callback has run, and its --root reads this variable)."""
    if ctx.invoked_subcommand is None:
        return False
    if root is not None:
        import os

        os.environ["JOURNAL_AGENT_ROOT"] = str(root)
    return True


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` with every control character of ``message`` written out (``\\x1b``): the
    CLI's one way to print, since what it prints so often comes from a file (an entry, a moment,
    a record, a draft, a tool's output) and a terminal obeys the escape sequences a planted file
    holds (journal_agent/terminal_text.py)."""
    typer.echo(visible(str(message)), err=err, nl=nl)


def cell(text: object) -> Text:
    """Data for a rich table cell or line (a title, a prompt, a description from a file): its
    control characters written out and no markup read (``[red]`` in a planted title is text)."""
    from rich.text import Text

    return Text(visible(str(text)))


def print_json(data: object) -> None:
    """``--json`` output: the characters a terminal acts on that JSON leaves raw (C1 controls,
    DEL, the bidirectional overrides) as ``\\u`` escapes, which parse back to the same data."""
    typer.echo(json_visible(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def print_json_list(items: Iterable[object]) -> None:
    """:func:`print_json` of a list, an item at a time: the same text, never the whole document
    (every card of a 100 MB journal, as one string and its escaped copy, took a gigabyte)."""
    first = True
    for item in items:
        text = json.dumps(item, indent=2, ensure_ascii=False, default=str)
        # An item's lines indented one level (a newline is never raw inside a JSON string).
        piece = ("[\n  " if first else ",\n  ") + text.replace("\n", "\n  ")
        typer.echo(json_visible(piece), nl=False)
        first = False
    typer.echo("[]" if first else "\n]")


def sandbox_notice(ws: Workspace) -> None:
    """Say once, on stderr, which of the project's settings files are ignored until approved,
    when Bash commands will run without the OS sandbox (and what that means), or when the
    settings ask for something the sandbox cannot enforce."""
    import sys

    from journal_agent.project_trust import ignored_notice
    from journal_agent.tools.sandbox import available_confinement, notice

    settings = ws.settings()
    for message in (
        ignored_notice(settings.ignored),
        notice(available_confinement(settings.sandbox, ws.root), settings.sandbox),
    ):
        if message:
            print(message, file=sys.stderr)
