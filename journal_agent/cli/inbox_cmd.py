"""``journal-agent inbox``: the learning moments the Claude Code hooks captured.

Listing, showing and dismissing read and append ``.journal/inbox.jsonl`` through
:mod:`journal_agent.capture`; ``inbox session`` lists and applies the 📚 session rows SessionEnd
proposed for the ledger. Module level stays light (typer only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    forward_root,
    open_workspace,
    print_json,
    resolve_root,
)
from journal_agent.errors import UserError
from journal_agent.terminal_text import visible

if TYPE_CHECKING:
    from journal_agent.capture.inbox import Moment
    from journal_agent.workspace import Workspace

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
    from journal_agent.capture.drafts import drafted_moments

    ws = open_workspace(root)
    moments = ws.inbox.read(include_dismissed=all_)
    if json_out:
        print_json([m.to_dict() for m in moments])
        return
    if not moments:
        echo("the inbox is empty: moments appear when Claude Code writes ★ Insight blocks")
        return
    drafted = drafted_moments(ws.root)
    for n, moment in enumerate(moments, 1):
        files = ", ".join(f.spec() for f in moment.files) or "no files"
        status = (
            f"  ({moment.dismissed or 'accepted'})" if moment.dismissed or moment.accepted else ""
        )
        if moment.id in drafted and not moment.dismissed:
            status += f"  (draft {drafted[moment.id]} waiting: `inbox drafts`)"
        line = f"{n:>3}. {moment.id}  {moment.time[:16].replace('T', ' ')}  {files}{status}"
        echo(visible(line))
        echo(f"     {_first_line(moment.text)}")


def _first_line(text: str, width: int = 96) -> str:
    line = visible(" ".join(text.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


@inbox_app.command("show")
def inbox_show_command(
    key: Annotated[str, typer.Argument(help="The moment's number in the list, or its id.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Print one moment whole: its text, the files and lines edited, the records created."""
    moment = _find(open_workspace(root), key)
    if json_out:
        print_json(moment.to_dict())
        return
    echo(f"{moment.kind} {moment.id} · {moment.time} · session {moment.session_id or '—'}")
    if moment.agent:
        echo(f"from the sub-agent {moment.agent}")
    echo("")
    echo(moment.text)
    if moment.files:
        echo("\nfiles edited: " + ", ".join(f.spec() for f in moment.files))
    if moment.records:
        echo("records: " + ", ".join(f"[m:{r}]" for r in moment.records))


@inbox_app.command("dismiss")
def inbox_dismiss_command(
    keys: Annotated[list[str], typer.Argument(help="Numbers or ids of the moments.")],
    written: Annotated[
        bool, typer.Option("--written", help="Mark them written into the journal.")
    ] = False,
    root: RootOption = None,
) -> None:
    """Take moments off the waiting list (kept in the file, marked dismissed or written)."""
    ws = open_workspace(root)
    # Resolve every key against the list as it is now: dismissing 1 must not renumber 2.
    chosen = [_find(ws, key) for key in keys]
    for moment in chosen:
        ws.inbox.dismiss(moment.id, "written" if written else "dismissed")
        echo(f"{'written' if written else 'dismissed'}: {moment.id}")


def _find(ws: Workspace, key: str) -> Moment:
    try:
        return ws.inbox.find(key)
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

    ws = open_workspace(root)
    if apply_ and discard:
        raise UserError("give --apply or --discard, not both.")
    if not (apply_ or discard):
        found = proposals.proposals(ws)
        if json_out:
            print_json([p.to_dict() for p in found])
        for n, p in enumerate([] if json_out else found, 1):
            for op in p.operations:
                echo(f"{n:>3}. {op.get('date')}  {op.get('topic')} — {op.get('outcome')}")
        if not found and not json_out:
            echo("no session row is proposed")
        return
    chosen = proposals.pick(ws, which)
    if discard:
        proposals.done(ws, chosen)
        echo(f"discarded {len(chosen)} proposed row{'s' if len(chosen) != 1 else ''}")
        return
    for change in proposals.apply(ws, chosen):
        echo(change)


# -- drafts: the learning-journal agent over the Messages API (off by default) ---------------


@inbox_app.command("draft")
def inbox_draft_command(
    keys: Annotated[
        list[str] | None,
        typer.Argument(help="Numbers or ids of the moments (default: every waiting one)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model or alias instead of the agent's own.")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show each first request's estimated size against the caps; send nothing.",
        ),
    ] = False,
    root: RootOption = None,
) -> None:
    """Draft entries from moments with the learning-journal agent, into .journal/drafts/.

    Off by default: it calls the Anthropic API (an API key, not a subscription login) and
    spends tokens, within the per-draft and daily caps of .journal/settings.json. Nothing is
    written to the journal until you accept a draft."""
    from journal_agent.drafts import caps
    from journal_agent.drafts.run import ensure_ready, pending

    ws = open_workspace(root)
    workspace = ws.root
    if not dry_run:
        caps.ensure_enabled(workspace)
    chosen = [_find(ws, key) for key in keys] if keys else ws.inbox.read()
    if not chosen:
        echo("the inbox is empty: there is nothing to draft")
        return
    todo, skipped = pending(workspace, chosen)
    for moment_id, draft_id in skipped.items():
        echo(
            f"skipped moment {moment_id}: already drafted as {draft_id} "
            f"(`journal-agent inbox reject-draft {draft_id}` to draft it again)"
        )
    if not todo:
        return
    if dry_run:
        _draft_preview(workspace, todo, model)
        return
    ensure_ready(workspace)  # the key and the caps: one sentence before anything is said
    if _draft(workspace, todo, model):
        raise typer.Exit(1)


def _draft(workspace, todo: list, model: str | None) -> int:
    """Run the drafts, printing each as it lands; how many moments gave none."""
    from rich.console import Console

    from journal_agent.drafts import caps
    from journal_agent.drafts.run import draft_moments
    from journal_agent.runtime.render import Renderer

    echo(f"drafting {len(todo)} moment(s) with the learning-journal agent…", err=True)
    failed = 0
    console = Console(stderr=True, highlight=False)
    # Each turn and tool call, live, on a terminal; in a pipe or a log the lines below suffice.
    renderer = Renderer(console) if console.is_terminal else None
    for done in draft_moments(workspace, todo, model=model, on_event=renderer):
        spent = f"({done.tokens:,} tokens)"
        for draft in done.drafts:
            rel = draft.path.relative_to(workspace)
            echo(f"drafted {draft.id} from moment {done.moment.id} → {rel} {spent}")
        if not done.ok:
            failed += 1
            why = done.stopped or _first_line(done.final_text) or "the agent saved no entry"
            echo(f"no draft from moment {done.moment.id} {spent}: {why}", err=True)
        elif done.stopped:
            echo(f"note: {done.stopped}", err=True)
    limits = caps.drafting_caps(workspace)
    echo(
        f"today: {caps.used_today(workspace):,} of {limits.daily:,} drafting tokens spent. "
        "`journal-agent inbox drafts` lists the drafts; accept-draft ID appends one to the "
        "journal, reject-draft ID deletes it."
    )
    return failed


def _draft_preview(workspace, todo: list, model: str | None) -> None:
    from journal_agent.drafts import caps
    from journal_agent.drafts.run import preview

    for item in preview(workspace, todo, model=model):
        parts = item["estimate"]
        verdict = "fits" if item["fits"] else "does NOT fit: it would not be sent"
        echo(
            f"moment {item['moment']}: {item['model']}, first request ≈ {parts['total']:,} "
            f"input tokens (tools {parts['tools']:,}, system {parts['system']:,}, messages "
            f"{parts['messages']:,}) + up to {item['max_tokens']:,} output; with the 20 % margin "
            f"{item['need']:,} of the {item['allowance']:,} this draft may spend: {verdict}"
        )
    try:
        caps.ensure_enabled(workspace)
    except UserError as off:
        echo(f"note: {off.message}")
    echo("nothing was sent (--dry-run)")


@inbox_app.command("drafts")
def inbox_drafts_command(
    key: Annotated[
        str | None, typer.Argument(help="A draft's number or id: print it whole.")
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """List the drafts `inbox draft` wrote (numbered for accept-draft / reject-draft)."""
    from journal_agent.capture.drafts import find_draft, list_drafts

    workspace = resolve_root(root)
    if key is not None:
        draft = find_draft(workspace, key)
        if json_out:
            print_json(draft.to_dict())
            return
        moments = ", ".join(draft.moments) or "none"
        said = f"draft {draft.id} · {draft.created} · {draft.model} · moments {moments}"
        echo(visible(said))
        echo(visible(f"{draft.path}") + "\n")
        echo(visible(draft.text), nl=False)
        return
    drafts = list_drafts(workspace)
    if json_out:
        print_json([d.to_dict() for d in drafts])
        return
    if not drafts:
        echo("no drafts: `journal-agent inbox draft` writes them from waiting moments")
        return
    for n, draft in enumerate(drafts, 1):
        moments = ", ".join(draft.moments) or "no moment"
        when = draft.created[:16].replace("T", " ")
        echo(visible(f"{n:>3}. {draft.id}  {when}  from {moments}"))
        echo(f"     {_first_line(draft.title)}")


@inbox_app.command("accept-draft")
def inbox_accept_draft_command(
    key: Annotated[str, typer.Argument(help="The draft's number or id.")],
    force: Annotated[
        bool, typer.Option("--force", help="Append even with problems (they are recorded).")
    ] = False,
    root: RootOption = None,
) -> None:
    """Append a draft to learning_journal.md (checked, locked, atomic) and mark its moments
    written; a draft with problems is kept and each problem listed."""
    from journal_agent.capture.drafts import accept

    workspace = resolve_root(root)
    done = accept(workspace, key, force=force)
    outcome, draft = done.outcome, done.draft
    if not outcome.appended:
        echo(
            f"draft {draft.id} not appended: {len(outcome.problems)} problem(s); fix "
            f"{draft.path} and accept it again (or --force):",
            err=True,
        )
        for p in outcome.problems:
            at = f"{draft.path.name}:{p.line + 1}  " if p.line else ""  # +1: the header line
            echo(f"  {at}{p.kind:<16} {p.detail}", err=True)
        raise typer.Exit(1)
    forced = f" with {len(outcome.problems)} problem(s) recorded" if outcome.forced else ""
    echo(f"appended {outcome.entry_id} at learning_journal.md:{outcome.line}{forced}")
    if done.marked:
        echo(f"marked written: {', '.join(done.marked)}")
    for warning in outcome.warnings:
        echo(f"warning: {warning}", err=True)


@inbox_app.command("reject-draft")
def inbox_reject_draft_command(
    key: Annotated[str, typer.Argument(help="The draft's number or id.")],
    dismiss_: Annotated[
        bool, typer.Option("--dismiss", help="Also dismiss the moments it came from.")
    ] = False,
    root: RootOption = None,
) -> None:
    """Delete a draft; its moments stay waiting (or go too, with --dismiss)."""
    from journal_agent.capture import dismiss
    from journal_agent.capture.drafts import reject

    workspace = resolve_root(root)
    draft = reject(workspace, key)
    echo(f"deleted draft {draft.id}")
    for moment in draft.moments if dismiss_ else ():
        try:
            dismiss(workspace, moment)
            echo(f"dismissed: {moment}")
        except KeyError:
            continue
