"""``journal-agent view`` (the local web view) and ``journal-agent export html|anki|json``.

The web stack (starlette, uvicorn, jinja2) is imported inside the commands only.
"""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import RootOption, echo, open_workspace
from journal_agent.errors import UserError

export_app = typer.Typer(
    help="The journal, its records and review cards as files to take elsewhere.",
    no_args_is_help=True,
)
app.add_typer(export_app, name="export")


def _require_web() -> None:
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn", "jinja2") if importlib.util.find_spec(m) is None]
    if missing:
        raise UserError(f"the view needs {', '.join(missing)}: pip install 'journal-agent[view]'.")


@app.command("view")
def view_command(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (default: a free one).")
    ] = 0,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Listen on this address instead of 127.0.0.1 (others could reach it: a "
            "warning is printed).",
            show_default=False,
        ),
    ] = None,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the address; do not open a browser.")
    ] = False,
    root: RootOption = None,
) -> None:
    """See the journal in your browser: entries with their code and numbers, the ledger,
    today's review. Local only, behind a random token; Ctrl-C stops it."""
    _require_web()
    from journal_agent.view.serve import LOOPBACK, Served, serve

    ws = open_workspace(root)

    def ready(served: Served) -> None:
        if served.warning:
            echo(f"warning: {served.warning}", err=True)
        echo(f"journal-agent view of {ws.root}: {served.url}")
        echo("Ctrl-C stops it.")
        sys.stdout.flush()
        if not no_open:
            webbrowser.open(served.url)

    serve(ws, host=host or LOOPBACK, port=port, on_ready=ready)


@export_app.command("html")
def export_html_command(
    directory: Annotated[Path, typer.Argument(help="A new (or empty) directory.")],
    root: RootOption = None,
) -> None:
    """Every page of the view as static files, linked relatively: open index.html, no server."""
    _require_web()
    from journal_agent.view.export import export_html

    done = export_html(open_workspace(root), directory)
    echo(f"wrote {done.pages} pages to {directory} (open {directory / 'index.html'})")


ForceOption = Annotated[
    bool, typer.Option("--force", help="Replace FILE if it exists (by default it is kept).")
]


@export_app.command("anki")
def export_anki_command(
    file: Annotated[Path, typer.Argument(help="The deck file to write (.apkg): a new one.")],
    force: ForceOption = False,
    root: RootOption = None,
) -> None:
    """The review cards as an Anki deck: the question in front, the answer and the cited code
    on the back."""
    from journal_agent.view.export import export_anki

    count = export_anki(open_workspace(root), file, force=force)
    echo(f"wrote {count} cards to {file}")


@export_app.command("json")
def export_json_command(
    file: Annotated[
        Path | None, typer.Argument(help="Write here (a new file) instead of standard output.")
    ] = None,
    force: ForceOption = False,
    root: RootOption = None,
) -> None:
    """Entries (with their references' states and citations), records, ledger and review
    cards as one JSON document."""
    from journal_agent.view.export import JsonExport

    # Written a piece at a time: the document of a 100 MB journal is never held whole.
    pieces = JsonExport(open_workspace(root))
    if file is None:
        from journal_agent.terminal_text import json_visible

        for piece in pieces:
            typer.echo(json_visible(piece), nl=False)  # (print_json's text, in pieces)
        typer.echo("")
        return
    from journal_agent.view.export import save_export

    save_export(file, (piece.encode() for piece in pieces), force=force)
    echo(f"wrote {pieces.entries} entries to {file}")
