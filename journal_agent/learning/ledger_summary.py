"""The shape of ``Ledger.summary()``: what ``journal-agent ledger --json``, the ledger tools
and the web view read (plain dicts at run time; these types are for the reader and the checker)."""

from __future__ import annotations

from typing import TypedDict


class ActionRow(TypedDict):
    horizon: str | None  # the ### heading above the item
    text: str
    done: bool
    line: int


class SessionSummary(TypedDict):
    date: str
    topic: str
    outcome: str
    line: int


class GoalRow(TypedDict):
    text: str
    done: bool
    line: int


class InsightRow(TypedDict):
    date: str | None
    title: str
    quote: str
    line: int


class LedgerSummary(TypedDict):
    title: str | None
    last_updated: str | None
    mastery: dict[str, list[str]]  # level (mastered, developing, blind_spots) -> item texts
    counts: dict[str, int]
    actions: list[ActionRow]
    sessions: list[SessionSummary]
    goals: list[GoalRow]
    insights: list[InsightRow]
    other_sections: list[str]
