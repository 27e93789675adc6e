"""What the CLI, the agent tools and the MCP server call for the ledger. No printing here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journal_agent.learning.ledger_check import LedgerProblem, LedgerReport, check_ledger
from journal_agent.learning.ledger_store import LedgerStore

NEW_SHOWN = 20


def overview(root: Path) -> dict[str, Any]:
    """The ledger's summary, what is due for review, and the review history's suggestions."""
    from journal_agent.learning import review

    summary = LedgerStore(root).load().summary()
    cards = review.queue(root)
    due = [
        {"id": c.id, "title": c.title, "kind": c.kind, "due": c.due, "state": c.state}
        for c in cards
        if c.state != "new"
    ]
    new = [{"id": c.id, "title": c.title, "kind": c.kind} for c in cards if c.state == "new"]
    return {
        **summary,
        "due": due,
        "new_count": len(new),
        "new": new[:NEW_SHOWN],  # a journal of 1,000 entries is not listed whole
        "suggestions": review.suggestions(root),
    }


def check(root: Path) -> LedgerReport:
    store = LedgerStore(root)
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
    return check_ledger(root, store.load())
