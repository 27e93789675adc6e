"""The ledger and the day's review as pages: the ledger's own summary and the review queue
(``journal.review``), with insights rendered like entries (their sources linked)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from journal_agent.errors import UserError
from journal_agent.view import markdown
from journal_agent.view.files import Refused
from journal_agent.view.site import Site, code_path, record_path, relative

NEW_PER_DAY = 20  # never-reviewed items per session, as `journal-agent review`'s default


def ledger_page(pages: Any, path: str) -> dict[str, Any]:
    site: Site = pages.site
    store = site.ws.ledger
    if not store.exists():
        return {"summary": None}
    summary = store.load().summary()
    insights = [
        {**i, "html": linked_text(site, path, i["quote"])} for i in summary.get("insights", [])
    ]
    return {"summary": summary, "insights": insights}


def linked_text(site: Site, path: str, text: str) -> Markup:
    """Text with its code references and citations linked, like an entry's: an insight's, a
    captured moment's."""

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
                "code": card_code(site, card.id) if card.kind == "entry" else None,
            }
            for card in cards
        ],
        "ratings": list(review.RATINGS),
    }


def card_code(site: Site, card_id: str) -> dict[str, Any] | None:
    """The code an entry's card explains, as it is now (``learning.review_code``), read as the
    view reads files: a secret is listed, never shown."""
    from journal_agent.learning import review_code

    entry = site.entry(card_id.removeprefix("entry:"))
    if entry is None or not entry.refs:
        return None
    anchors = site.recorded_hashes().get(entry.id, {})
    cited = review_code.cited_code(site.root, entry, anchors, _reader(site))
    return {
        "entry": entry.id,
        "refs": [c.to_dict() for c in cited],
        "changed": review_code.code_changed(cited),
    }


def _reader(site: Site):
    def read(rel: str) -> str | None:
        try:
            return site.files.read(rel).text
        except Refused:
            return None

    return read


def check_number(site: Site, card_id: str, answer: str) -> dict[str, str]:
    """A number card's answer checked against its record (``learning.number_cards``)."""
    from journal_agent.learning.number_cards import check_answer, number_cards

    card = next((c for c in number_cards(site.ws) if c.id == card_id), None)
    if card is None:
        raise UserError(f"no number card has the id {card_id!r}; reload the review page.")
    return check_answer(card, answer).to_dict()


def code_action(site: Site, card_id: str, action: str) -> dict[str, Any]:
    """An entry card's changed code: ``holds`` records it as it is now (``journal refresh``),
    ``revise`` leaves a moment in the inbox for the entry to be revised."""
    from journal_agent.learning import review_code

    entry = site.entry(card_id.removeprefix("entry:"))
    if entry is None:
        raise UserError(f"no entry has the id {card_id!r}; reload the review page.")
    anchors = site.recorded_hashes().get(entry.id, {})
    cited = review_code.cited_code(site.root, entry, anchors, _reader(site))
    if not review_code.code_changed(cited):
        raise UserError("the code this entry explains has not changed; nothing to do.")
    if action == "holds":
        return {"recorded": review_code.still_holds(site.root, entry.id, cited)}
    if action == "revise":
        return {"moment": review_code.revise_later(site.root, entry, cited, "seen in review")}
    raise UserError("the action must be holds or revise.")


def _none(_: Any) -> None:
    return None
