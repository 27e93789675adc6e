"""Number cards: "re-derive this number".

Every number an entry quotes beside a citation (``64.80 GB per GPU … [m:est-13d7dbbf]``) is a
value of the cited record (``journal check`` holds it to that). Such a number becomes a card:
the front shows the sentence it was quoted in with the number blanked, and the record's
configuration; the learner answers with a number and a unit; the answer is checked against the
record's value, and the record's calculation is shown after.

**When an answer counts** (:func:`check_answer`): when it is within the precision the journal
states the number with (half a unit of its last digit: ``64.80 GB`` is ±0.005 GB), in any unit
of the same kind (``60.35 GiB`` for ``64.80 GB``). An answer within 1 % is *close* (rounded
arithmetic); anything else is wrong. An answer without a unit is read in the stated unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from journal_agent.errors import UserError
from journal_agent.journal import numbers
from journal_agent.journal._text import slugify

if TYPE_CHECKING:
    from collections.abc import Iterable

    from journal_agent.journal.model import Entry
    from journal_agent.workspace import Workspace
    from profiling.records import MeasurementRecord

CLOSE = 0.01  # within this share of the value an answer is close, not right
BLANK = "▢▢▢"
_SKIP_CONFIG = frozenset(["command", "argv", "cwd"])


@dataclass(frozen=True)
class Step:
    name: str
    formula: str
    substituted: str
    result: str  # the value in the stated unit


@dataclass(frozen=True)
class NumberCard:
    id: str  # number:<record id>:<slug of the quantity>
    record: str
    kind: str  # estimated | traced | measured
    title: str  # the record's title
    quantity: str  # the record's name for the value
    value: float  # in the record's unit
    unit: str
    stated: str  # as the journal states it: "64.80 GB"
    decimals: int
    stated_unit: str
    sentence: str  # where it was quoted, the number blanked
    entry: str  # the entry that quotes it
    config: tuple[tuple[str, str], ...] = ()
    steps: tuple[Step, ...] = field(default=())

    def question(self) -> str:
        shown = "\n".join(f"- {k}: {v}" for k, v in self.config) or "- (no configuration kept)"
        return (
            f"Re-derive this number ({self.quantity}, {self.kind}):\n\n> {self.sentence}\n\n"
            f"The record's configuration ([m:{self.record}], {self.title}):\n{shown}"
        )

    def answer(self) -> str:
        return f"{self.stated} ({self.quantity} of [m:{self.record}])\n\n{self.calculation()}"

    def calculation(self) -> str:
        if not self.steps:
            return f"A {self.kind} value: the record holds no calculation steps."
        rows = [f"- {s.name}: {s.formula} = {s.substituted} = {s.result}" for s in self.steps]
        return "The calculation:\n" + "\n".join(rows)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = [list(pair) for pair in self.config]
        return data


def number_cards(ws: Workspace, entries: Iterable[Entry] | None = None) -> list[NumberCard]:
    """One card per record value the journal quotes (the first quote of it), in journal order;
    ``entries``: the journal's (default: read an entry at a time)."""
    cards = Cards(ws)
    if entries is not None:
        for entry in entries:
            cards.add(entry)
    elif ws.journal.exists():
        from journal_agent.journal.api import open_journal

        with open_journal(ws) as journal:
            for entry in journal.entries():
                cards.add(entry)
    return cards.found()


class Cards:
    """The number cards of entries given one at a time (a reader that walks the journal for
    something else collects them on the way, without holding the entries)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._records: dict[str, MeasurementRecord | None] = {}
        self._out: dict[str, NumberCard] = {}

    def add(self, entry: Entry) -> None:
        for card in _quoted(self.ws, entry, self._records):
            self._out.setdefault(card.id, card)

    def found(self) -> list[NumberCard]:
        return list(self._out.values())


def _quoted(
    ws: Workspace, entry: Entry, records: dict[str, MeasurementRecord | None]
) -> list[NumberCard]:
    from journal_agent.journal.disagree import quoted_values

    def record_of(record_id: str) -> MeasurementRecord | None:
        if record_id not in records:
            try:
                records[record_id] = ws.records.load(record_id)
            except (KeyError, ValueError):
                records[record_id] = None
        return records[record_id]

    out = []
    for quote in quoted_values(entry, record_of):
        start, end = quote.sentence
        q = quote.quoted
        sentence = quote.text[start : q.start] + BLANK + quote.text[q.end : end]
        sentence = " ".join(sentence.replace(f"[m:{quote.record.id}]", "").split())
        sentence = sentence.replace(" .", ".").replace(" ,", ",")
        out.append(
            NumberCard(
                id=f"number:{quote.record.id}:{slugify(quote.quantity)}",
                record=quote.record.id,
                kind=quote.record.kind,
                title=quote.record.title,
                quantity=quote.quantity,
                value=quote.value,
                unit=quote.unit,
                stated=q.text,
                decimals=q.decimals,
                stated_unit=q.unit,
                sentence=sentence,
                entry=entry.id,
                config=_config(quote.record.config),
                steps=tuple(_steps(quote.record, q)),
            )
        )
    return out


def _config(config: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The configuration as it is shown: the core settings, then what differs from the
    defaults (``profiling.config_table.shown``)."""
    from profiling.config_table import shown

    return tuple(
        (key, value if isinstance(value, str) else _plain(value))
        for key, value in shown(config)
        if key not in _SKIP_CONFIG
    )


def _plain(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _steps(record: MeasurementRecord, like: numbers.Quoted) -> list[Step]:
    """The calculation up to the step that gives the quoted number (the steps after it — a
    time estimate's FLOPs after a memory peak — derive other numbers); all of it when no step
    gives it."""
    steps = list(record.steps)
    giving = [i for i, s in enumerate(steps) if numbers.matches(like, s.value, s.unit)]
    if giving:
        steps = steps[: giving[-1] + 1]
    return [
        Step(s.name, s.formula, s.substituted, numbers.describe(s.value, s.unit, like))
        for s in steps
    ]


@dataclass(frozen=True)
class Verdict:
    result: str  # right | close | wrong
    said: str  # the answer as read ("65 GB")
    sentence: str  # one sentence for the learner

    @property
    def rating(self) -> str:
        """The rating the result suggests (the learner still chooses)."""
        return {"right": "good", "close": "hard", "wrong": "again"}[self.result]

    def to_dict(self) -> dict[str, str]:
        return {**asdict(self), "rating": self.rating}


def check_answer(card: NumberCard, answer: str) -> Verdict:
    """Whether ``answer`` (``65 GB``, ``60.3GiB``, ``64.8``) is the card's number."""
    import re

    text = answer.strip().replace(",", "")
    m = re.fullmatch(r"[~≈]?\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*([A-Za-zµμ]*)", text)
    if m is None:
        raise UserError(
            f"{answer!r} is not a number; answer like {card.stated} (a number and its unit)."
        )
    value = float(m.group(1)) * 10.0 ** int(m.group(2) or 0)
    unit = m.group(3) or card.stated_unit
    shown_text = f"{m.group(1)}{'e' + m.group(2) if m.group(2) else ''} {unit}"
    said = numbers.Quoted(shown_text, value, 0, unit, 0, 0)
    mine = numbers.unit_scale(said.unit)
    theirs = numbers.unit_scale(card.unit)
    stated = numbers.unit_scale(card.stated_unit)
    if mine is None or theirs is None or stated is None or mine[0] != theirs[0]:
        raise UserError(
            f"{said.text} is not in a unit of {card.stated}'s kind; answer like {card.stated}."
        )
    truth = card.value * theirs[1]  # in base units (bytes, seconds)
    given = said.value * mine[1]
    tolerance = 0.5 * 10.0 ** (-card.decimals) * stated[1]
    shown = numbers.describe(card.value, card.unit, _like(card))
    if abs(given - truth) <= tolerance * (1 + 1e-9):
        return Verdict("right", said.text, f"Right: the record says {shown}.")
    if truth and abs(given - truth) <= CLOSE * abs(truth):
        return Verdict(
            "close",
            said.text,
            f"Close: {said.text} is within 1 % of the record's {shown}, which the journal "
            f"states to {_precision(card)}.",
        )
    return Verdict("wrong", said.text, f"Not quite: the record says {shown}.")


def _like(card: NumberCard) -> numbers.Quoted:
    return numbers.Quoted(card.stated, 0.0, card.decimals, card.stated_unit, 0, 0)


def _precision(card: NumberCard) -> str:
    step = 10.0 ** (-card.decimals)
    return f"{step:.{card.decimals}f} {card.stated_unit}"
