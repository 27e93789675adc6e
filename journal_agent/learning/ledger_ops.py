"""One ledger update, as the CLI, the agent tools and the MCP server all describe it.

A flat model (an ``op`` plus the fields that op uses) rather than a union of models: its JSON
schema is what the model sees in the ``LedgerUpdate`` tool, and a flat schema with one
``enum`` is the easiest for a model to fill in correctly.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.learning import ledger_edit as edit
from journal_agent.learning.ledger import Ledger

# Bounds on one update: a model's batch is a session's worth of changes, not a bulk import.
# Each operation costs time in the ledger's size (it is re-read after every line it adds), so
# the count is what keeps one update within a second of work; the lengths keep a line a line.
MAX_OPERATIONS = 200
MAX_TEXT = 4_000  # an item's, action's, goal's or insight's text
MAX_SHORT = 500  # a match, level, horizon, date, topic, title, note
MAX_SOURCES = 20

Op = Literal[
    "add_session",
    "archive_insight",
    "add_item",
    "move_item",
    "add_action",
    "tick_action",
    "add_goal",
    "tick_goal",
    "set_updated",
]


def _tidy(schema: dict) -> None:
    from journal_agent.tools._schema import tidy_schema

    tidy_schema(schema)


class LedgerOperation(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_tidy)

    op: Op = Field(
        description="add_session: a row in 📚 Session History (date, topic, outcome; the newest "
        "row is bolded). archive_insight: a dated, quoted insight in 💡 Key Insights Archive "
        "(title, text, sources). add_item: a new 🧠 knowledge item (level, text). move_item: "
        "move an existing item to another mastery level (match, level; text rewrites it). "
        "add_action: a '- [ ]' item under an action horizon (horizon, text). tick_action / "
        "tick_goal: tick the item or goal whose words match (match; note is appended, e.g. "
        "'*(完成)*'). add_goal: a new 🎯 course goal (text). set_updated: the Last Updated date."
    )
    text: str | None = Field(
        default=None,
        max_length=MAX_TEXT,
        description="The item's, action's, goal's or insight's text, in the ledger's "
        "language(s) and style, e.g. '**NVTX annotation**: Using `nvtx.range()` … *(新增)*'.",
    )
    match: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="For move_item / tick_action / tick_goal: words of the existing line "
        "(unique; case and ** markup ignored).",
    )
    level: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="For add_item / move_item: mastered, developing or blind.",
    )
    horizon: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="For add_action: the horizon heading's words, e.g. 'Immediate', "
        "'Short-term', 'Long-term' (created if the ledger lacks it).",
    )
    date: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="YYYY-MM-DD for add_session / archive_insight / set_updated (default: today).",
    )
    topic: str | None = Field(
        default=None, max_length=MAX_SHORT, description="For add_session: the session's topic."
    )
    outcome: str | None = Field(
        default=None,
        max_length=MAX_TEXT,
        description="For add_session: the session's key outcome, one sentence.",
    )
    title: str | None = Field(
        default=None, max_length=MAX_SHORT, description="For archive_insight: a short title."
    )
    sources: list[Annotated[str, Field(max_length=MAX_SHORT)]] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description="For archive_insight: where each number in it comes from — 'm:<id>' for a "
        "measurement record, or a journal entry id (from `journal-agent journal list`).",
    )
    note: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="For tick_action / tick_goal: a marker appended on ticking.",
    )


def _need(op: LedgerOperation, *names: str) -> list[str]:
    values = []
    for name in names:
        value = getattr(op, name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise edit.LedgerError(f"{op.op} needs '{name}'; give it and try again.")
        values.append(value)
    return values


def apply(ledger: Ledger, op: LedgerOperation) -> str:
    """Apply one operation in memory; returns what changed, for the user or the model."""
    if op.op == "add_session":
        topic, outcome = _need(op, "topic", "outcome")
        line = edit.add_session(ledger, op.date, topic, outcome)
        return f"session row added at line {line}: {topic}"
    if op.op == "archive_insight":
        title, text = _need(op, "title", "text")
        line = edit.archive_insight(ledger, op.date, title, text, op.sources)
        return f"insight archived at line {line}: {title}"
    if op.op == "add_item":
        level, text = _need(op, "level", "text")
        item = edit.add_item(ledger, level, text)
        return f"item added under {edit.LEVEL_NAMES[item.level]} at line {item.lineno}"
    if op.op == "move_item":
        match, level = _need(op, "match", "level")
        item = edit.move_item(ledger, match, level, op.text)
        return f"moved to {edit.LEVEL_NAMES[item.level]} (line {item.lineno}): {item.text}"
    if op.op == "add_action":
        horizon, text = _need(op, "horizon", "text")
        box = edit.add_action(ledger, horizon, text)
        return f"action item added under {box.horizon} at line {box.lineno}"
    if op.op in ("tick_action", "tick_goal"):
        (match,) = _need(op, "match")
        section = "actions" if op.op == "tick_action" else "goals"
        box = edit.tick(ledger, section, match, op.note)
        return f"ticked (line {box.lineno}): {box.text}"
    if op.op == "add_goal":
        (text,) = _need(op, "text")
        box = edit.add_goal(ledger, text)
        return f"goal added at line {box.lineno}"
    assert op.op == "set_updated"
    edit.set_updated(ledger, op.date)
    return f"last updated set to {ledger.last_updated}"


def validate(root, operations: list[LedgerOperation]) -> None:
    """Refuse an insight whose numbers have no source, or whose sources do not resolve —
    before anything is written, so the ledger never gains what ``ledger check`` rejects."""
    from journal_agent.learning.ledger_check import SourceChecker, insight_problems

    with SourceChecker(root) as checker:
        for op in operations:
            if op.op != "archive_insight":
                continue
            refs = [edit.source_ref(s) for s in op.sources]
            for ref in refs:
                kind, _, ident = ref[1:-1].partition(":")
                why = checker.record_problem(ident) if kind == "m" else checker.entry_problem(ident)
                if why:
                    raise edit.LedgerError(f"the insight was not archived: {why}.")
            for _, detail in insight_problems(checker, op.text or "", refs):
                raise edit.LedgerError(f"the insight was not archived: it {detail}.")
