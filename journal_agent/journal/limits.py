"""Bounds on what a search may ask, checked where the query comes in (the JournalSearch tool,
``journal-agent journal search`` / ``related``) before the index sees it.

Ranking cost grows with the number of terms (a 400,000-word query took 22 s): no real question
needs more than a few dozen words, and a draft for ``related`` is one entry.
"""

from __future__ import annotations

from journal_agent.errors import UserError

MAX_QUERY_CHARS = 1_000
MAX_QUERY_TERMS = 64
MAX_DRAFT_CHARS = 50_000


def check_query(query: str) -> None:
    """Raise :class:`UserError` (one sentence) when ``query`` is too long to be a question."""
    terms = len(query.split())
    if len(query) > MAX_QUERY_CHARS or terms > MAX_QUERY_TERMS:
        raise UserError(
            f"the search query is too long ({len(query):,} characters, {terms:,} words; at most "
            f"{MAX_QUERY_CHARS:,} characters and {MAX_QUERY_TERMS} words): search for the few "
            "words that matter, or use related_to / `journal related` with a draft."
        )


def check_draft(draft: str) -> None:
    if len(draft) > MAX_DRAFT_CHARS:
        raise UserError(
            f"the draft is too long to compare ({len(draft):,} characters; at most "
            f"{MAX_DRAFT_CHARS:,}): pass one entry, or its title and key terms."
        )
