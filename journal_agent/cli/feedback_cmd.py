"""``journal-agent feedback``: record feedback with the change it led to; see, diff, revert."""

from __future__ import annotations

from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, print_json, resolve_root
from journal_agent.errors import UserError


@app.command("feedback")
def feedback_command(
    text: Annotated[
        str | None,
        typer.Argument(help="The user's feedback on the last entry.", show_default=False),
    ] = None,
    file: Annotated[
        str,
        typer.Option(
            "--file", "-f", help="The ejected command or agent it changed (name or path)."
        ),
    ] = "learn",
    history: Annotated[
        bool, typer.Option("--history", help="Every record: when, the feedback, the change.")
    ] = False,
    diff: Annotated[
        int | None,
        typer.Option("--diff", help="The diff of change N.", show_default=False, min=1),
    ] = None,
    revert: Annotated[
        int | None,
        typer.Option(
            "--revert",
            help="Put the file back as it was before change N.",
            show_default=False,
            min=1,
        ),
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Record the user's feedback with the change it led to in an ejected command or agent."""
    from journal_agent.learning.feedback import FeedbackLog

    log = FeedbackLog(resolve_root(root))
    chosen = [x for x in (text is not None, history, diff is not None, revert is not None) if x]
    if len(chosen) != 1:
        raise UserError(
            "give exactly one of: the feedback text, --history, --diff N or --revert N "
            '(e.g. journal-agent feedback "more toy examples" --file learn).'
        )
    if history:
        _history(log, json_out)
    elif diff is not None:
        _diff(log, diff, json_out)
    elif revert is not None:
        _revert(log, revert, json_out)
    else:
        assert text is not None
        _record(log, text, file, json_out)


def _history(log, json_out: bool) -> None:
    records, tampered = log.read()
    if json_out:
        print_json([r.to_dict() for r in records])
    else:
        for r in records:
            echo(f"#{r.n}  {r.time[:19]}Z  {r.file}  +{r.added} -{r.removed}  {r.feedback}")
        if not records and not tampered:
            echo("no feedback recorded yet")
    # Reported, never listed as an ordinary record: someone wrote it by hand (.journal/ is out
    # of the model's reach) — or a tool call before that was closed.
    for bad in tampered:
        echo(f"warning: {bad.sentence(log.path)}", err=True)
    if tampered:
        raise typer.Exit(1)


def _diff(log, n: int, json_out: bool) -> None:
    patch = log.diff(n)
    if json_out:
        print_json({**log.get(n).to_dict(), "diff": patch})
    else:
        echo(patch or f"change #{n} changed nothing", nl=not patch)


def _revert(log, n: int, json_out: bool) -> None:
    record = log.revert(n)
    if json_out:
        print_json(record.to_dict())
    else:
        echo(
            f"#{record.n}: {record.file} is back as it was before change #{n} "
            f"(+{record.added} -{record.removed}); undo with `journal-agent feedback "
            f"--revert {record.n}`"
        )


def _record(log, text: str, file: str, json_out: bool) -> None:
    record = log.record(text, file)
    if json_out:
        print_json(record.to_dict())
    elif record.added or record.removed:
        echo(
            f"#{record.n}: feedback recorded with its change to {record.file} "
            f"(+{record.added} -{record.removed}; `journal-agent feedback --diff {record.n}`)"
        )
    else:
        echo(f"#{record.n}: feedback recorded; {record.file} has not changed since the last record")
