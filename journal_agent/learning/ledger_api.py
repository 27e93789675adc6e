"""What the CLI, the agent tools and the MCP server call for the ledger. No printing here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from journal_agent.learning.ledger_check import LedgerProblem, LedgerReport, check_ledger
from journal_agent.learning.ledger_summary import LedgerSummary

if TYPE_CHECKING:
    from journal_agent.learning.review import Suggestion
    from journal_agent.workspace import Workspace

NEW_SHOWN = 20


class DueRow(TypedDict):
    id: str
    title: str
    kind: str  # entry | item | insight
    due: str | None
    state: str


class NewRow(TypedDict):
    id: str
    title: str
    kind: str


class Overview(LedgerSummary):
    """The ledger's summary with what is due for review (LedgerShow, ``journal-agent ledger``)."""

    due: list[DueRow]
    new_count: int
    new: list[NewRow]  # at most NEW_SHOWN
    suggestions: list[Suggestion]
    check: NotRequired[dict[str, Any]]  # LedgerShow with check=true: LedgerReport.to_dict()


def overview(ws: Workspace) -> Overview:
    """The ledger's summary, what is due for review, and the review history's suggestions."""
    from journal_agent.learning import review

    summary = ws.ledger.load().summary()
    cards = review.queue(ws)
    due = [
        DueRow(id=c.id, title=c.title, kind=c.kind, due=c.due, state=c.state)
        for c in cards
        if c.state != "new"
    ]
    new = [NewRow(id=c.id, title=c.title, kind=c.kind) for c in cards if c.state == "new"]
    return Overview(
        **summary,
        due=due,
        new_count=len(new),
        new=new[:NEW_SHOWN],  # a journal of 1,000 entries is not listed whole
        suggestions=review.suggestions(ws),
    )


def check(ws: Workspace) -> LedgerReport:
    store = ws.ledger
    if not store.exists():
        return LedgerReport(
            ok=False,
            problems=[
                LedgerProblem(
                    "structure",
                    "there is no learning_ledger.md yet; create it with `journal-agent ledger "
                    "init` or run /end-session",
                )
            ],
        )
    return check_ledger(ws.root, store.load())
