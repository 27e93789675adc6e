"""Spaced review of what the journal and the ledger hold, scheduled by FSRS (the ``fsrs`` package).

What can be reviewed (each with a stable id):

* ``entry:<entry id>`` — a journal entry: its key question first, its intuition and key insights
  as the answer;
* ``item:<slug>`` — a knowledge-graph item of the ledger (the slug of its bold term, or of its
  words): "what do you know about …", then the item as the ledger states it;
* ``insight:<date>-<slug>`` — an archived insight: its title, then the quotation;
* ``number:<record id>:<slug>`` — a number an entry quotes from a record: "re-derive this
  number" from the record's configuration, the answer checked against the record's value and
  the calculation shown after (:mod:`journal_agent.learning.number_cards`).

An entry's card also shows the code its references cite, as it is now
(:mod:`journal_agent.learning.review_code`).

State lives in ``.journal/review.json`` (one FSRS card per reviewed id, and every review as a
log line), replaced atomically under ``.journal/locks/review.lock``. A corrupt state file is
moved aside (nothing is deleted) and the user is told in one sentence. Scheduling is the
package's own ``Scheduler.review_card`` with its default parameters and fuzzing off, so a
schedule can be replayed and checked; datetimes are UTC, as fsrs requires.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from journal_agent.errors import UserError
from journal_agent.journal._text import slugify
from journal_agent.learning.number_cards import Cards, NumberCard
from journal_agent.learning.review_state import STATE_VERSION

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fsrs import Card
    from fsrs.review_log import ReviewLogDict

    from journal_agent.journal.model import Entry
    from journal_agent.learning.review_state import State
    from journal_agent.workspace import Workspace

RATINGS = {"again": 1, "hard": 2, "good": 3, "easy": 4}
RATING_NAMES = {v: k for k, v in RATINGS.items()}
# Review history → ledger suggestions (never applied silently; /end-session asks or applies).
FAILED_RECENT = 4  # of the last this many ratings …
FAILED_AGAIN = 2  # … this many "again" → suggest 🔴
EASY_STREAK = 3  # this many good/easy ratings in a row …
EASY_SPAN = timedelta(days=14)  # … spread over at least two weeks → suggest 🟢


@dataclass
class ReviewItem:
    id: str
    kind: str  # entry | item | insight | number
    title: str
    question: str
    answer: str
    level: str | None = None  # for ledger items: mastered / developing / blind_spots
    number: NumberCard | None = None  # for a number card

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scheduler():
    from fsrs import Scheduler

    return Scheduler(enable_fuzzing=False)


def parse_rating(value: str | int) -> int:
    text = str(value).strip().lower()
    if text in RATINGS:
        return RATINGS[text]
    if text in ("1", "2", "3", "4"):
        return int(text)
    raise UserError(f"{value!r} is not a rating; use again, hard, good or easy (or 1-4).")


def utc(moment: datetime | None = None) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    if moment.tzinfo is None:
        raise UserError(f"{moment.isoformat()} has no time zone; give it in UTC, e.g. …Z.")
    return moment.astimezone(UTC)


# -- what can be reviewed ------------------------------------------------------------------


def collect_items(ws: Workspace) -> list[ReviewItem]:
    """Every journal entry, ledger item and archived insight, in document order, then the
    numbers the journal quotes from records (a list: for small workspaces and tests; readers
    of a journal of any size walk :func:`iter_items`)."""
    return list(iter_items(ws))


def iter_items(ws: Workspace) -> Iterator[ReviewItem]:
    """:func:`collect_items` one at a time: the journal is read an entry at a time, its
    number cards collected on the way (memory bounded by an entry and the cards, not the
    journal: a 100 MB journal read whole took 1.5 GB for `review --list`)."""
    cards = Cards(ws)
    journal = ws.journal
    if journal.exists():
        from journal_agent.journal.api import open_journal

        with open_journal(ws) as opened:
            for entry in opened.entries():
                cards.add(entry)
                yield _entry_item(entry)
    yield from _ledger_items(ws)
    for card in cards.found():
        yield ReviewItem(
            card.id,
            "number",
            f"Re-derive: {card.quantity} of [m:{card.record}]",
            card.question(),
            card.answer(),
            number=card,
        )


def _entry_item(entry: Entry) -> ReviewItem:
    question = _strip_label(entry.section_text("key_question")) or entry.title
    answer = "\n\n".join(
        part.strip()
        for part in (entry.section_text("intuition"), entry.section_text("key_insights"))
        if part.strip()
    ) or _excerpt(entry.raw)
    return ReviewItem(f"entry:{entry.id}", "entry", entry.title, question, answer)


def _ledger_items(ws: Workspace) -> Iterator[ReviewItem]:
    ledger_store = ws.ledger
    if ledger_store.exists():
        ledger = ledger_store.load()
        seen: set[str] = set()
        for item in ledger.items():
            term = _term(item.text)
            ident = f"item:{slugify(term)}"
            if ident in seen:
                continue
            seen.add(ident)
            yield ReviewItem(
                ident,
                "item",
                term,
                f"What do you know about {term}? Explain it, then check.",
                item.text,
                item.level,
            )
        for insight in ledger.insights():
            ident = f"insight:{insight.date or 'undated'}-{slugify(insight.title)}"
            if ident in seen:
                continue
            seen.add(ident)
            yield ReviewItem(
                ident,
                "insight",
                insight.title,
                f"Insight: {insight.title} — what is it, and why?",
                insight.quote,
            )


def _term(text: str) -> str:
    from journal_agent.learning.ledger import key_term

    return key_term(text)


def _strip_label(section: str) -> str:
    lines = section.strip().splitlines()
    if not lines:
        return ""
    first = lines[0]
    if first.lstrip().startswith("#"):
        lines = lines[1:]
    elif first.lstrip().startswith("**") and "**" in first.lstrip()[2:]:
        rest = first.lstrip()[2:]
        lines[0] = rest[rest.index("**") + 2 :].lstrip(" :")
    return "\n".join(line for line in lines).strip().strip("*").strip()


def _excerpt(raw: str, lines: int = 12) -> str:
    return "".join(raw.splitlines(keepends=True)[1 : lines + 1]).strip()


# -- scheduling ------------------------------------------------------------------------------


@dataclass
class DueCard:
    id: str
    title: str
    kind: str
    due: str | None  # ISO UTC; None for an item never reviewed (due now)
    state: str  # new | learning | review | relearning
    reviews: int
    question: str
    answer: str
    number: NumberCard | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def queue(
    ws: Workspace, now: datetime | None = None, *, new_limit: int | None = None
) -> list[DueCard]:
    """What is due at ``now``: reviewed cards whose due date has come (most overdue first),
    then items never reviewed (at most ``new_limit`` of them, oldest first: a journal of a
    thousand entries should not arrive as a thousand questions on day one). Every item with
    its due date is :func:`every_card`."""
    from fsrs import Card

    now = utc(now)
    state = ws.review.load()
    counts = _review_counts(state)
    reviewed, fresh = [], []
    for item in iter_items(ws):
        saved = state["cards"].get(item.id)
        if saved is None:
            # Beyond the limit: shown on another day, not held (a 100 MB journal has 72,000).
            if new_limit is None or len(fresh) < new_limit:
                fresh.append(_due_card(item, None, 0))
            continue
        card = Card.from_dict(saved["card"])
        if card.due <= now:
            reviewed.append((card.due, _due_card(item, card, counts.get(item.id, 0))))
    reviewed.sort(key=lambda pair: pair[0])
    return [card for _, card in reviewed] + fresh


def every_card(ws: Workspace) -> Iterator[DueCard]:
    """Every item with its due date, in :func:`queue`'s order (reviewed cards by due date,
    then those never reviewed, in journal order), handed out one at a time. The reviewed
    cards are held (they are sorted; the review state that names them is held anyway); the
    others are read from the journal a second time (the only time when nothing was reviewed
    yet) as they are asked for (every card of a 100 MB journal held at once took 362 MB for
    `review --list --all --json`)."""
    from fsrs import Card

    state = ws.review.load()
    counts = _review_counts(state)
    reviewed = []
    for item in iter_items(ws) if state["cards"] else ():  # nothing reviewed: one reading
        saved = state["cards"].get(item.id)
        if saved is not None:
            card = Card.from_dict(saved["card"])
            reviewed.append((card.due, _due_card(item, card, counts.get(item.id, 0))))
    reviewed.sort(key=lambda pair: pair[0])
    for _, due_card in reviewed:
        yield due_card
    del reviewed
    for item in iter_items(ws):
        if item.id not in state["cards"]:
            yield _due_card(item, None, 0)


def _review_counts(state: State) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in state["log"]:
        counts[line["item"]] = counts.get(line["item"], 0) + 1
    return counts


def _due_card(item: ReviewItem, card: Card | None, reviews: int) -> DueCard:
    """``item`` as a card of the queue; ``card`` is fsrs's (None: never reviewed)."""
    due, state = (None, "new") if card is None else (card.due.isoformat(), card.state.name.lower())
    return DueCard(
        item.id, item.title, item.kind, due, state, reviews, item.question, item.answer, item.number
    )


class Rated(TypedDict):
    id: str
    rating: str  # again | hard | good | easy
    reviewed: str  # ISO UTC
    due: str
    state: str  # learning | review | relearning
    stability: float | None
    log: ReviewLogDict  # fsrs's ReviewLog.to_dict()


def rate(ws: Workspace, item_id: str, rating: str | int, now: datetime | None = None) -> Rated:
    """Record one review and schedule the next; returns the new due date and state."""
    from fsrs import Card, Rating

    value = parse_rating(rating)
    now = utc(now)
    found = next((i for i in iter_items(ws) if i.id == item_id), None)
    if found is None:
        raise UserError(
            f"nothing to review has the id {item_id!r}; `journal-agent review --list --all` "
            "shows the ids."
        )
    store = ws.review
    with store.locked():
        state = store.load()
        saved = state["cards"].get(item_id)
        card = Card.from_dict(saved["card"]) if saved else Card(due=now)
        card, log = scheduler().review_card(card, Rating(value), review_datetime=now)
        state["cards"][item_id] = {"card": card.to_dict(), "title": found.title}
        state["log"].append(
            {
                "item": item_id,
                "rating": value,
                "at": now.isoformat(),
                "due": card.due.isoformat(),
                "stability": card.stability,
            }
        )
        state["version"] = STATE_VERSION
        store.save(state)
    return {
        "id": item_id,
        "rating": RATING_NAMES[value],
        "reviewed": now.isoformat(),
        "due": card.due.isoformat(),
        "state": card.state.name.lower(),
        "stability": card.stability,
        "log": log.to_dict(),
    }


# -- history → ledger suggestions ------------------------------------------------------------


class Suggestion(TypedDict):
    id: str  # the reviewed item
    to: str  # the mastery level the history supports: mastered | blind_spots
    reason: str  # one sentence
    operation: dict[str, str]  # the ledger operation (move_item / add_item) that applies it
    command: str  # the same as a journal-agent command


def suggestions(ws: Workspace) -> list[Suggestion]:
    """Mastery moves the review history supports: an item failed repeatedly → 🔴, one recalled
    well over weeks → 🟢. Suggestions only; /end-session (or the user) applies them."""
    state = ws.review.load()
    history: dict[str, list[tuple[datetime, int]]] = {}
    for line in state["log"]:
        history.setdefault(line["item"], []).append(
            (datetime.fromisoformat(line["at"]), int(line["rating"]))
        )
    out: list[Suggestion] = []
    # The reviewed items only (and the ledger's, which are few): not every entry of the journal.
    items = {i.id: i for i in iter_items(ws) if i.id in history or i.kind == "item"}
    ledger_terms = {i.id for i in items.values() if i.kind == "item"}
    for item_id, reviews in history.items():
        item = items.get(item_id)
        if item is None or item.kind in ("insight", "number"):
            continue
        reviews.sort()
        ratings = [r for _, r in reviews]
        recent = ratings[-FAILED_RECENT:]
        streak = reviews[-EASY_STREAK:]
        to = None
        if recent.count(RATINGS["again"]) >= FAILED_AGAIN:
            to = "blind_spots"
            reason = (
                f"'{item.title}' was forgotten {recent.count(1)} of the last {len(recent)} reviews"
            )
        elif (
            len(streak) == EASY_STREAK
            and all(r >= RATINGS["good"] for _, r in streak)
            and streak[-1][0] - streak[0][0] >= EASY_SPAN
        ):
            to = "mastered"
            days = (streak[-1][0] - streak[0][0]).days
            reason = f"'{item.title}' was recalled well {EASY_STREAK} times over {days} days"
        if to is None or item.level == to:
            continue
        if item.kind == "item":
            op = {"op": "move_item", "match": item.title, "level": to}
            command = f'journal-agent ledger move "{item.title}" {_short_level(to)}'
        else:
            if f"item:{slugify(item.title)}" in ledger_terms:
                continue
            entry = item_id.removeprefix("entry:")
            from journal_agent.learning.ledger_edit import entry_ref

            text = f"**{item.title}** {entry_ref(entry)}"
            op = {"op": "add_item", "level": to, "text": text}
            command = f"journal-agent ledger add-item {_short_level(to)} '{text}'"
        out.append({"id": item_id, "to": to, "reason": reason, "operation": op, "command": command})
    return out


def _short_level(level: str) -> str:
    return "blind" if level == "blind_spots" else level
