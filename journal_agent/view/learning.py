"""The ledger and the day's review as pages: the ledger's own summary and the review queue
(``journal.review``), with insights rendered like entries (their sources linked)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from journal_agent.view import markdown
from journal_agent.view.site import Site, code_path, record_path, relative

NEW_PER_DAY = 20  # never-reviewed items per session, as `journal-agent review`'s default


def ledger_page(pages: Any, path: str) -> dict[str, Any]:
    site: Site = pages.site
    store = site.ws.ledger
    if not store.exists():
        return {"summary": None}
    summary = store.load().summary()
    insights = [
        {**i, "html": _source_text(site, path, i["quote"])} for i in summary.get("insights", [])
    ]
    return {"summary": summary, "insights": insights}


def _source_text(site: Site, path: str, text: str) -> Markup:
    """An insight's text with its code references and citations linked, like an entry's."""

    def ref_link(ref: Any) -> markdown.Link | None:
        target = site.ref_target(ref)
        if target is None:
            return None
        lines = f"L{ref.start}" if ref.start == ref.end else f"L{ref.start}-{ref.end}"
        return markdown.Link(f"{relative(path, code_path(target))}#{lines}", "ref")

    def cite_link(record_id: str) -> markdown.Link | None:
        if not site.ws.records.exists(record_id):
            return None
        return markdown.Link(relative(path, record_path(record_id)), "cite")

    return Markup(markdown.render(text, ref_link, cite_link))


def review_page(site: Site) -> dict[str, Any]:
    from journal_agent.learning import review

    cards = review.queue(site.ws, new_limit=NEW_PER_DAY)
    return {
        "cards": [
            {
                **card.to_dict(),
                "question_html": Markup(markdown.render(card.question, _none, _none)),
                "answer_html": Markup(markdown.render(card.answer, _none, _none)),
            }
            for card in cards
        ],
        "ratings": list(review.RATINGS),
    }


def _none(_: Any) -> None:
    return None
