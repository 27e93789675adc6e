"""The ``journal-agent`` command line.

Each submodule registers its commands on ``app``. Module level imports here and in the
submodules stay light (typer, rich, pydantic): anthropic, torch, mcp and matplotlib are
imported inside the commands that need them, so ``--help`` and the journal commands start fast.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import typer

from journal_agent import __version__
from journal_agent.errors import as_user_error

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


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``; each is light to import.
    # The order is the order of `--help`: the daily commands first.
    from journal_agent.cli import (  # noqa: F401, I001
        run_cmd,
        journal_cmd,
        ledger_cmd,
        review_cmd,
        inbox_cmd,
        view_cmd,
        feedback_cmd,
        profiling_cmd,
        trace_cmd,
        fit_cmd,
        measure_cmd,
        agents_cmd,
        tool_cmd,
        mcp_cmd,
        doctor_cmd,
    )


_register()


def _read_only_in_sandbox(exc: BaseException) -> bool:
    """A write refused by the sandbox's read-only view (we run inside it when it gave us an
    outbox for records)."""
    import errno
    import os

    sandboxed = "JOURNAL_AGENT_OUTBOX" in os.environ
    return sandboxed and isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: expected failures become one sentence on stderr and a non-zero exit code.

    ``argv`` defaults to ``sys.argv[1:]``; tests pass it to run the CLI in-process.
    """
    try:
        # Standalone: click reports usage errors itself and exits with their codes.
        app(args=None if argv is None else list(argv), prog_name="journal-agent")
    except Exception as exc:
        # Ours and profiling's expected failures: one sentence, no traceback. A bug re-raises.
        error = as_user_error(exc)
        if error is None and _read_only_in_sandbox(exc):
            print(
                "error: journal-agent cannot write its journal, ledger or state from inside "
                "the sandbox, where they are read-only; run this journal-agent command alone "
                "on its Bash line (nothing before or after it), and the host runs it, or use "
                "the JournalAppend / LedgerUpdate tool.",
                file=sys.stderr,
            )
            sys.exit(1)
        if error is None:
            raise
        print(f"error: {error.message}", file=sys.stderr)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        print("interrupted.", file=sys.stderr)
        sys.exit(130)
