"""``journal-agent inbox``: the learning moments the Claude Code hooks captured.

Listing, showing and dismissing read and append ``.journal/inbox.jsonl`` through
:mod:`journal_agent.capture`; ``inbox session`` lists and applies the 📚 session rows SessionEnd
proposed for the ledger. Module level stays light (typer only).
"""

from __future__ import annotations

from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    forward_root,
    print_json,
    resolve_root,
)
from journal_agent.errors import UserError

inbox_app = typer.Typer(
    help="Learning moments captured in Claude Code (★ Insight blocks, edits, measurements)."
)
app.add_typer(inbox_app, name="inbox")


@inbox_app.callback(invoke_without_command=True)
def inbox_command(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Also list the moments dismissed or written.")
    ] = False,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """List the moments waiting to become journal entries (numbered for show/dismiss)."""
    if forward_root(ctx, root):
        return
    from journal_agent.capture import read_inbox

    moments = read_inbox(resolve_root(root), include_dismissed=all_)
    if json_out:
        print_json([m.to_dict() for m in moments])
        return
    if not moments:
        typer.echo("the inbox is empty: moments appear when Claude Code writes ★ Insight blocks")
        return
    for n, moment in enumerate(moments, 1):
        files = ", ".join(f.spec() for f in moment.files) or "no files"
        status = f"  ({moment.dismissed})" if moment.dismissed else ""
        typer.echo(f"{n:>3}. {moment.id}  {moment.time[:16].replace('T', ' ')}  {files}{status}")
        typer.echo(f"     {_first_line(moment.text)}")


def _first_line(text: str, width: int = 96) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


@inbox_app.command("show")
def inbox_show_command(
    key: Annotated[str, typer.Argument(help="The moment's number in the list, or its id.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Print one moment whole: its text, the files and lines edited, the records created."""
    moment = _find(resolve_root(root), key)
    if json_out:
        print_json(moment.to_dict())
        return
    typer.echo(f"{moment.kind} {moment.id} · {moment.time} · session {moment.session_id or '—'}")
    if moment.agent:
        typer.echo(f"from the sub-agent {moment.agent}")
    typer.echo("")
    typer.echo(moment.text)
    if moment.files:
        typer.echo("\nfiles edited: " + ", ".join(f.spec() for f in moment.files))
    if moment.records:
        typer.echo("records: " + ", ".join(f"[m:{r}]" for r in moment.records))


@inbox_app.command("dismiss")
def inbox_dismiss_command(
    keys: Annotated[list[str], typer.Argument(help="Numbers or ids of the moments.")],
    written: Annotated[
        bool, typer.Option("--written", help="Mark them written into the journal.")
    ] = False,
    root: RootOption = None,
) -> None:
    """Take moments off the waiting list (kept in the file, marked dismissed or written)."""
    from journal_agent.capture import dismiss

    workspace = resolve_root(root)
    # Resolve every key against the list as it is now: dismissing 1 must not renumber 2.
    chosen = [_find(workspace, key) for key in keys]
    for moment in chosen:
        dismiss(workspace, moment.id, "written" if written else "dismissed")
        typer.echo(f"{'written' if written else 'dismissed'}: {moment.id}")


def _find(root, key: str):
    from journal_agent.capture import find

    try:
        return find(root, key)
    except KeyError as exc:
        raise UserError(f"{exc.args[0]}; `journal-agent inbox` lists them.") from None


@inbox_app.command("session")
def inbox_session_command(
    which: Annotated[
        str | None, typer.Argument(help="A proposal's number or file name (default: all).")
    ] = None,
    apply_: Annotated[
        bool, typer.Option("--apply", help="Add the row(s) to learning_ledger.md.")
    ] = False,
    discard: Annotated[bool, typer.Option("--discard", help="Drop the proposal(s).")] = False,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """The 📚 session rows proposed at the end of Claude Code sessions; --apply or --discard."""
    from journal_agent.capture import proposals

    workspace = resolve_root(root)
    if apply_ and discard:
        raise UserError("give --apply or --discard, not both.")
    if not (apply_ or discard):
        found = proposals.proposals(workspace)
        if json_out:
            print_json([p.to_dict() for p in found])
        for n, p in enumerate([] if json_out else found, 1):
            for op in p.operations:
                typer.echo(f"{n:>3}. {op.get('date')}  {op.get('topic')} — {op.get('outcome')}")
        if not found and not json_out:
            typer.echo("no session row is proposed")
        return
    chosen = proposals.pick(workspace, which)
    if discard:
        proposals.done(chosen)
        typer.echo(f"discarded {len(chosen)} proposed row{'s' if len(chosen) != 1 else ''}")
        return
    for change in proposals.apply(workspace, chosen):
        typer.echo(change)
