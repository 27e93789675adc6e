"""The typer application every command module adds itself to, and the root options.

Kept apart from ``journal_agent.cli`` so a command module imports this, not its own package: no
import circle. The commands' modules are imported only when used (``cli/_commands.py`` lists
them): start-up pays for the command that runs, not for all of them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from journal_agent import __version__
from journal_agent.cli import _typer_values
from journal_agent.cli._commands import COMMANDS

# The arguments of the command being run (``main`` sets them): a record says which command
# made it (``cli._profiling_common.invocation``).
INVOCATION: list[str] = []


class LazyGroup(TyperGroup):
    """The top-level group: every command of the table, its module imported when it is used.

    Listing a command (``journal-agent --help``) shows the table's line and imports nothing;
    running it, or asking for its own ``--help``, imports its module.
    """

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*COMMANDS, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        # One line in the list: the table keeps the docstring's line breaks, which rich would
        # print as breaks in mid-sentence ("… offload and micro-batch / searched, …").
        line = " ".join(COMMANDS[cmd_name][1].split())
        return TyperCommand(cmd_name, short_help=line, help=line)  # a stand-in, only listed

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in COMMANDS and args[0] not in self.commands:
            self.commands[args[0]] = _load(args[0])
        return super().resolve_command(ctx, args)


def load_all() -> None:
    """Import every command module (each adds its commands to ``app``), for what looks at the
    whole command line at once."""
    for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
        importlib.import_module(f"journal_agent.cli.{module}")


def _load(name: str) -> Any:
    """Import the module of command ``name`` and build its click command as typer would."""
    import typer.main

    importlib.import_module(f"journal_agent.cli.{COMMANDS[name][0]}")
    for info in app.registered_commands:
        callback_name = getattr(info.callback, "__name__", "")
        if (info.name or typer.main.get_command_name(callback_name)) == name:
            return typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group in app.registered_groups:
        if group.name == name:
            return typer.main.get_group_from_info(
                group,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise LookupError(f"journal_agent.cli.{COMMANDS[name][0]} defines no command {name!r}")


# Options left out, str and Path values converted without pydantic (cli/_typer_values.py).
_typer_values.install()
app = typer.Typer(
    cls=LazyGroup,
    name="journal-agent",
    help="A learning journal for ML training systems that writes itself — and that you can trust.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"journal-agent {__version__}")  # (ours: nothing to write out)
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
        configure_logging("DEBUG")


def configure_logging(level: int | str) -> None:
    """Send journal_agent's and profiling's log records at ``level`` (a number or a name such
    as ``"DEBUG"``) and above to stderr.

    Only the CLI configures logging (never on import); without ``--verbose`` Python's
    last-resort handler still shows warnings. ``logging`` is imported here, not at start-up.
    """
    import logging

    from journal_agent.terminal_text import visible

    class _Visible(logging.Formatter):
        # A tolerated failure may quote a file (a name, a line): written out, never obeyed.
        def format(self, record: logging.LogRecord) -> str:
            return visible(super().format(record))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Visible("%(levelname)s %(name)s: %(message)s"))
    for name in ("journal_agent", "profiling"):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        # One handler, on the current stderr, however often this runs in one process.
        for old in [h for h in logger.handlers if getattr(h, "_journal_agent", False)]:
            logger.removeHandler(old)
        handler._journal_agent = True  # type: ignore[attr-defined]  # our mark, read by getattr
        logger.addHandler(handler)
