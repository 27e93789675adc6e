"""The typer application every command module adds itself to, and the root options.

Kept apart from ``journal_agent.cli`` (which imports every command module) so a command module
imports this, not its own package: no import circle.
"""

from __future__ import annotations

import logging
import sys

import typer

from journal_agent import __version__

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
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Also print, on stderr, the failures that were tolerated (e.g. a search index "
        "that could not be updated after an append).",
    ),
) -> None:
    """journal-agent: learn ML training systems while you code."""
    if verbose:
        configure_logging(logging.DEBUG)


def configure_logging(level: int) -> None:
    """Send journal_agent's and profiling's log records at ``level`` and above to stderr.

    Only the CLI configures logging (never on import); without ``--verbose`` Python's
    last-resort handler still shows warnings.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in ("journal_agent", "profiling"):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        # One handler, on the current stderr, however often this runs in one process.
        for old in [h for h in logger.handlers if getattr(h, "_journal_agent", False)]:
            logger.removeHandler(old)
        handler._journal_agent = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
