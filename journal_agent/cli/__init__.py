"""The ``journal-agent`` command line.

Each submodule registers its commands on ``app``. Module level imports here and in the
submodules stay light (typer, rich, pydantic): anthropic, torch, mcp and matplotlib are
imported inside the commands that need them, so ``--help`` and the journal commands start fast.
"""

from __future__ import annotations

import sys

import typer

from journal_agent import __version__
from journal_agent.errors import UserError

app = typer.Typer(
    name="journal-agent",
    help="A learning journal for ML training systems that writes itself — and that you can trust.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"journal-agent {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """journal-agent: learn ML training systems while you code."""


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``; each is light to import.
    # The order is the order of `--help`: the daily commands first.
    from journal_agent.cli import (  # noqa: F401, I001
        run_cmd,
        journal_cmd,
        profiling_cmd,
        agents_cmd,
        tool_cmd,
        mcp_cmd,
        doctor_cmd,
    )


_register()


def main() -> None:
    """Entry point: expected failures become one sentence on stderr and a non-zero exit code."""
    try:
        # Standalone: click reports usage errors itself and exits with their codes.
        app(prog_name="journal-agent")
    except UserError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted.", file=sys.stderr)
        sys.exit(130)
