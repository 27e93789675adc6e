"""``journal-agent ledger …``: show, check and update learning_ledger.md.

Every update goes through :class:`journal_agent.learning.ledger_store.LedgerStore` (atomic,
under the journal's lock, every other line kept). Module level stays light (typer only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    forward_root,
    open_workspace,
    print_json,
)
from journal_agent.errors import UserError

ledger_app = typer.Typer(
    help="The learning ledger: mastery levels, review queue, sessions, goals, insights.",
)
app.add_typer(ledger_app, name="ledger")

DateOption = Annotated[
    str | None, typer.Option("--date", help="YYYY-MM-DD (default: today).", show_default=False)
]


def _update(root: Path | None, json_out: bool, *ops: dict, title: str | None = None) -> None:
    from pydantic import ValidationError

    from journal_agent.learning.ledger_ops import LedgerOperation

    store = open_workspace(root).ledger
    try:
        operations = [LedgerOperation(**op) for op in ops]
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise UserError(f"{field}: {err['msg']}; fix it and try again.") from None
    result = store.update(operations, title=title)
    if json_out:
        print_json(result.to_dict())
        return
    if result.created:
        echo(f"created {result.path.name}")
    for change in result.changes:
        echo(change)
    if not result.changes and not result.created:
        echo("nothing to change")


@ledger_app.callback(invoke_without_command=True)
def ledger_command(
    ctx: typer.Context,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Show the ledger: mastery counts, what is due for review, the last sessions."""
    if forward_root(ctx, root):
        return
    from journal_agent.learning import ledger_api

    overview = ledger_api.overview(open_workspace(root))
    if json_out:
        print_json(overview)
        return
    counts = overview["counts"]
    echo(f"{overview['title']}  (last updated {overview['last_updated'] or '—'})")
    echo(
        f"🟢 {counts['mastered']} mastered   🟡 {counts['developing']} developing   "
        f"🔴 {counts['blind_spots']} blind spots"
    )
    open_actions = [a for a in overview["actions"] if not a["done"]]
    echo(f"open action items: {len(open_actions)}")
    for action in open_actions[:5]:
        echo(f"  - [ ] {action['text']}  ({action['horizon'] or 'no horizon'})")
    due, new = overview["due"], overview["new_count"]
    echo(
        f"due for review: {len(due)}, never reviewed: {new}"
        + ("  (journal-agent review)" if due or new else "")
    )
    for card in due[:5]:
        echo(f"  {card['id']}  {card['title']}")
    sessions = overview["sessions"][-3:]
    if sessions:
        echo("last sessions:")
        for row in sessions:
            echo(f"  {row['date']}  {row['topic']} — {row['outcome']}")
    for suggestion in overview["suggestions"]:
        echo(f"suggested: {suggestion['reason']}  → `{suggestion['command']}`")


@ledger_app.command("check")
def ledger_check_command(json_out: JsonOption = False, root: RootOption = None) -> None:
    """Sources of insights' numbers, references to entries and records, and structure."""
    from journal_agent.learning import ledger_api

    ws = open_workspace(root)
    report = ledger_api.check(ws)
    if json_out:
        print_json(report.to_dict())
    else:
        for p in report.problems:
            where = f"learning_ledger.md:{p.line}" if p.line else "learning_ledger.md"
            echo(f"  {where}  {p.kind:<16} {p.detail}")
        n = len(report.problems)
        echo(
            f"{n} problem{'s' if n != 1 else ''}"
            + ("" if n else " — every source resolves and the structure is sound")
        )
    if not report.ok:
        raise typer.Exit(1)


@ledger_app.command("init")
def ledger_init_command(
    title: Annotated[
        str, typer.Option("--title", help="The course or topic, e.g. 'CS336'.")
    ] = "Learning Ledger",
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Create learning_ledger.md with every section, empty."""
    store = open_workspace(root).ledger
    if store.exists():
        raise UserError(f"{store.path} already exists; update it with the ledger subcommands.")
    result = store.edit(lambda ledger: [], title=title)
    if json_out:
        print_json(result.to_dict())
    else:
        echo(f"created {result.path}")


@ledger_app.command("session")
def ledger_session_command(
    topic: Annotated[str, typer.Argument(help="What the session was about.")],
    outcome: Annotated[str, typer.Argument(help="Its key outcome, one sentence.")],
    date: DateOption = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Add a 📚 session-history row (the newest row is bold)."""
    _update(root, json_out, {"op": "add_session", "topic": topic, "outcome": outcome, "date": date})


@ledger_app.command("insight")
def ledger_insight_command(
    title: Annotated[str, typer.Argument(help="A short title.")],
    text: Annotated[str, typer.Argument(help="The insight, one to three sentences.")],
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            "-s",
            help="m:<record id> or a journal entry id (repeatable).",
            show_default=False,
        ),
    ] = None,
    date: DateOption = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Archive a 💡 insight, quoted, with the sources of its numbers."""
    op = {"op": "archive_insight", "title": title, "text": text, "sources": source or []}
    _update(root, json_out, {**op, "date": date})


@ledger_app.command("add-item")
def ledger_add_item_command(
    level: Annotated[str, typer.Argument(help="mastered, developing or blind.")],
    text: Annotated[str, typer.Argument(help="The item, e.g. '**Term**: what you know'.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Add a 🧠 knowledge-graph item at a mastery level."""
    _update(root, json_out, {"op": "add_item", "level": level, "text": text})


@ledger_app.command("move")
def ledger_move_command(
    match: Annotated[str, typer.Argument(help="Words of the item (unique).")],
    level: Annotated[str, typer.Argument(help="mastered, developing or blind.")],
    text: Annotated[
        str | None, typer.Option("--text", help="Rewrite the item's words too.", show_default=False)
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Move a knowledge-graph item to another mastery level."""
    _update(root, json_out, {"op": "move_item", "match": match, "level": level, "text": text})


@ledger_app.command("add-action")
def ledger_add_action_command(
    horizon: Annotated[str, typer.Argument(help="immediate, short-term, long-term, or a heading.")],
    text: Annotated[str, typer.Argument(help="The action item.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Add a '- [ ]' action item under a horizon."""
    _update(root, json_out, {"op": "add_action", "horizon": horizon, "text": text})


NoteOption = Annotated[
    str | None,
    typer.Option("--note", help="Appended when ticking, e.g. '*(完成)*'.", show_default=False),
]


@ledger_app.command("tick")
def ledger_tick_command(
    match: Annotated[str, typer.Argument(help="Words of the action item (unique).")],
    note: NoteOption = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Tick an action item."""
    _update(root, json_out, {"op": "tick_action", "match": match, "note": note})


@ledger_app.command("add-goal")
def ledger_add_goal_command(
    text: Annotated[str, typer.Argument(help="The course goal.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Add a 🎯 course goal."""
    _update(root, json_out, {"op": "add_goal", "text": text})


@ledger_app.command("tick-goal")
def ledger_tick_goal_command(
    match: Annotated[str, typer.Argument(help="Words of the goal (unique).")],
    note: NoteOption = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Tick a course goal."""
    _update(root, json_out, {"op": "tick_goal", "match": match, "note": note})


@ledger_app.command("updated")
def ledger_updated_command(
    date: DateOption = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Set the **Last Updated:** date."""
    _update(root, json_out, {"op": "set_updated", "date": date})


@ledger_app.command("apply")
def ledger_apply_command(
    file: Annotated[
        Path, typer.Argument(help="A JSON list of operations (as the LedgerUpdate tool takes).")
    ],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Apply several updates at once, all or none ('-' reads standard input)."""
    import sys

    from pydantic import ValidationError

    try:
        raw = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        ops = json.loads(raw)
    except OSError as exc:
        raise UserError(f"cannot read {file}: {exc.strerror}; check the path.") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{file} is not JSON ({exc}); give a list of operations.") from None
    if isinstance(ops, dict):
        ops = ops.get("operations", [ops])
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise UserError(f"{file} must hold a JSON list of operations like {{'op': 'add_goal'}}.")
    try:
        _update(root, json_out, *ops)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"operation field {where}: {first['msg']}; fix it in {file}.") from None
