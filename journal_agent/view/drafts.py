"""The drafts ``inbox draft`` wrote, on the inbox page, and what their two buttons do.

Accept and Reject are ``journal-agent inbox accept-draft`` / ``reject-draft``: the same
functions (:mod:`journal_agent.capture.drafts`), so an accept runs every check an append runs
under the journal's lock, and a draft that fails one is kept and its problems are shown —
nothing is appended. Reject deletes the draft; its moments stay waiting.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from journal_agent.errors import UserError
from journal_agent.journal.refs import CodeRef
from journal_agent.view import markdown
from journal_agent.view.site import Site, code_path, record_path, relative

PAGE = "inbox.html"


def page(site: Site) -> dict[str, Any]:
    """``drafts``: each waiting draft as safe HTML, with the moments it came from."""
    from journal_agent.capture.drafts import list_drafts

    drafts = list_drafts(site.root)
    if not drafts:
        return {"drafts": []}
    waiting = {m.id: m for m in site.ws.inbox.read()}
    return {
        "drafts": [
            {
                "draft": draft,
                "html": Markup(markdown.render(draft.text, _ref_link(site), _cite_link(site))),
                "moments": [(m, waiting.get(m)) for m in draft.moments],
            }
            for draft in drafts
        ]
    }


def _ref_link(site: Site) -> markdown.RefLinker:
    def link(ref: CodeRef) -> markdown.Link | None:
        target = site.files.readable(ref.path)  # None: outside the workspace, a secret, gone
        if target is None:
            return None
        return markdown.Link(f"{relative(PAGE, code_path(target))}#L{ref.start}-{ref.end}", "ref")

    return link


def _cite_link(site: Site) -> markdown.CiteLinker:
    def link(record_id: str) -> markdown.Link | None:
        if not site.ws.records.exists(record_id):
            return None
        return markdown.Link(relative(PAGE, record_path(record_id)), "cite")

    return link


def accept(site: Site, draft_id: str) -> tuple[int, dict[str, Any]]:
    """``inbox accept-draft ID``: 200 and where it landed, or 409 and the problems (kept)."""
    from journal_agent.capture.drafts import accept as append

    done = append(site.root, _full_id(site, draft_id))
    outcome, draft = done.outcome, done.draft
    if not outcome.appended:
        problems = [
            {"line": p.line + 1 if p.line else None, "kind": p.kind, "detail": p.detail}
            for p in outcome.problems  # +1: the file's header line, as the CLI counts
        ]
        where = draft.path.relative_to(site.root) if draft.path.is_relative_to(site.root) else None
        error = (
            f"Not appended: {len(problems)} problem(s). The draft is kept: fix "
            f"{where or draft.path} and accept it again (or run journal-agent inbox "
            f"accept-draft {draft.id} --force)."
        )
        return 409, {"id": draft.id, "appended": False, "error": error, "problems": problems}
    return 200, {
        "id": draft.id,
        "appended": True,
        "entry": outcome.entry_id,
        "line": outcome.line,
        "marked": done.marked,
        "warnings": outcome.warnings,
    }


def reject(site: Site, draft_id: str) -> tuple[int, dict[str, Any]]:
    """``inbox reject-draft ID``: the draft is deleted, its moments stay waiting."""
    from journal_agent.capture.drafts import reject as delete

    draft = delete(site.root, _full_id(site, draft_id))
    return 200, {"id": draft.id, "rejected": True, "moments": list(draft.moments)}


def _full_id(site: Site, draft_id: str) -> str:
    # Only a full id: a number or a prefix could name another draft by the time it acts.
    from journal_agent.capture.drafts import find_draft

    if not draft_id or draft_id.isdigit() or find_draft(site.root, draft_id).id != draft_id:
        raise UserError(f"no draft has the id {draft_id!r}; reload the inbox.")
    return draft_id
