"""``journal-agent review``: spaced review (FSRS) of journal entries and ledger items.

On a terminal it asks the key question, shows the answer when asked, takes a rating and
schedules the next review; ``--list`` and ``--rate`` are for scripts and agents.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    open_workspace,
    print_json,
    print_json_list,
)
from journal_agent.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from journal_agent.learning.review import DueCard
    from journal_agent.workspace import Workspace

_KEYS = "[1] again  [2] hard  [3] good  [4] easy  [q] quit"


def _moment(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"--at {value!r} is not a date and time; write it like 2026-11-23T09:00:00Z."
        ) from None


@app.command("review")
def review_command(
    list_: Annotated[bool, typer.Option("--list", help="List what is due; do not ask.")] = False,
    all_: Annotated[
        bool, typer.Option("--all", help="With --list: every item, due or not.")
    ] = False,
    rate: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--rate",
            help="Rate one item without asking: ID RATING (again, hard, good, easy or 1-4).",
            show_default=False,
        ),
    ] = None,
    new: Annotated[
        int,
        typer.Option("--new", help="At most this many never-reviewed items per session.", min=0),
    ] = 20,
    suggest: Annotated[
        bool,
        typer.Option("--suggest", help="Mastery moves the review history supports (🔴 / 🟢)."),
    ] = False,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="The review's time in UTC (default: now), e.g. to record a review done on paper.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Review what is due: the key question first, the answer on request, then your rating."""
    from journal_agent.learning import review

    ws = open_workspace(root)
    now = _moment(at)
    if rate is not None:
        _rate(ws, rate, now, json_out)
    elif suggest:
        _suggest(ws, json_out)
    elif list_ or json_out:
        cards = review.every_card(ws) if all_ else review.queue(ws, now, new_limit=new)
        _list(cards, json_out)
    elif not sys.stdin.isatty():
        raise UserError(
            "review asks questions on a terminal; run it in one, or use `review --list` and "
            "`review --rate ID RATING` from a script."
        )
    else:
        _interactive(ws, review.queue(ws, now, new_limit=new), now)


def _rate(ws: Workspace, rate: tuple[str, str], now, json_out: bool) -> None:
    from journal_agent.learning import review

    outcome = review.rate(ws, rate[0], rate[1], now)
    if json_out:
        print_json(outcome)
    else:
        echo(f"{outcome['id']}: {outcome['rating']} — next review {outcome['due']}")


def _suggest(ws: Workspace, json_out: bool) -> None:
    from journal_agent.learning import review

    found = review.suggestions(ws)
    if json_out:
        print_json(found)
        return
    for s in found:
        echo(f"{s['reason']}  → {s['command']}")
    if not found:
        echo("no suggestions: the review history supports no mastery move yet")


def _list(cards: Iterable[DueCard], json_out: bool) -> None:
    """The cards as they come (every card of a journal is never held: ``review --list --all``)."""
    if json_out:
        print_json_list(c.to_dict() for c in cards)
        return
    shown = False
    for c in cards:
        shown = True
        if c.due is None:
            echo(f"{c.id}  {c.title}  (never reviewed)")
        else:
            when = c.due[:16].replace("T", " ")
            echo(f"{c.id}  {c.title}  ({c.state}, due {when} UTC, {c.reviews} reviews)")
    if not shown:
        echo("nothing is due")


def _interactive(ws: Workspace, cards, now) -> None:
    from journal_agent.learning import review

    if not cards:
        echo("Nothing is due. Well done.")
        return
    echo(f"{len(cards)} due. Answer in your head (or on paper), then rate your recall.\n")
    done = 0
    for n, card in enumerate(cards, start=1):
        echo(f"── {n}/{len(cards)}  {card.title}  ({card.id})")
        echo(card.question)
        if card.number is not None:
            choice = _number(card.number)
        else:
            choice = _ask("\n[Enter] show the answer  [s] skip  [q] quit: ")
            if choice not in ("q", "s", None):
                echo("\n" + card.answer + "\n")
                if card.kind == "entry":
                    choice = _code(ws, card.id.removeprefix("entry:"))
        if choice in ("q", None):
            break
        if choice == "s":
            continue
        while True:
            answer = _ask(f"{_KEYS}: ")
            if answer in ("q", None):
                echo(f"Reviewed {done}.")
                return
            try:
                outcome = review.rate(ws, card.id, answer, now)
            except UserError as exc:
                echo(exc.message)
                continue
            done += 1
            when = outcome["due"][:16].replace("T", " ")
            echo(f"→ {outcome['rating']}; next review {when} UTC\n")
            break
    echo(f"Reviewed {done}.")


def _number(card) -> str | None:
    """A number card: the learner's answer checked against the record, then the calculation.
    Returns what was typed at the last prompt ("q", "s", None at end of input, else "")."""
    from journal_agent.learning.number_cards import check_answer

    while True:
        prompt = f"\nYour answer (like {card.stated}), [Enter] show it  [s] skip  [q] quit: "
        said = _ask(prompt, lower=False)
        if said in ("q", "s", None):
            return said
        if not said:
            echo(f"\n{card.stated} ({card.quantity} of [m:{card.record}])")
            break
        try:
            verdict = check_answer(card, said)
        except UserError as exc:
            echo(exc.message)
            continue
        echo(f"\n{verdict.sentence}  (suggested: {verdict.rating})")
        break
    echo("\n" + card.calculation() + "\n")
    return ""


def _code(ws: Workspace, entry_id: str) -> str | None:
    """The code the entry explains, as it is now; when it changed, whether the explanation
    still holds (record the code as it is) or the entry needs revising (a moment waits).
    Returns "q" (or None at end of input) to stop reviewing, else ""."""
    from journal_agent.journal.api import open_journal
    from journal_agent.learning import review_code

    with open_journal(ws) as journal:
        entry = journal.find(entry_id)
    if entry is None or not entry.refs:
        return ""
    from journal_agent.view.files import text_reader

    with ws.refs.anchors_on_disk() as recorded:
        anchors = recorded.get(entry.id, {})
    cited = review_code.cited_code(ws.root, entry, anchors, text_reader(ws.root))
    echo("The code it explains, as it is now:")
    for c in cited:
        echo(f"  {c.ref}  {c.state}" + ("" if c.state == "fresh" else f": {c.detail}"))
        if c.diff:
            for line in c.diff:
                echo(f"      {line}")
            continue
        for k, line in enumerate(c.lines, start=c.start):
            echo(f"    {k:>5}  {line}")
    echo("")
    if not review_code.code_changed(cited):
        return ""
    choice = _ask(
        "The code changed since this entry was written. Does the explanation still hold?\n"
        "[y] yes: record the code as it is now  [r] no: revise the entry (a moment waits in the "
        "inbox)  [Enter] decide later  [q] quit: "
    )
    if choice in ("q", None):
        return choice
    if choice == "y":
        try:
            recorded = review_code.still_holds(ws.root, entry.id, cited)
        except UserError as exc:
            echo(f"Nothing recorded: {exc.message}")
        else:
            echo(f"Recorded the code as it is now: {', '.join(recorded)}.")
    elif choice == "r":
        moment = review_code.revise_later(ws.root, entry, cited, "seen in review")
        echo(
            f"Moment {moment} waits in the inbox: /learn with no topic (or `journal-agent "
            f"inbox show {moment}`) revises {entry.id}."
        )
    echo("")
    return ""


def _ask(prompt: str, *, lower: bool = True) -> str | None:
    """The answer typed (lowercased, unless a number card's answer: ``64.8 GB``); None at end
    of input (Ctrl-D)."""
    try:
        typed = input(prompt).strip()
    except EOFError:
        return None
    return typed.lower() if lower or typed.lower() in ("q", "s") else typed
