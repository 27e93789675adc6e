"""The inbox of captured moments as a page (``journal_agent.capture``), and what its two
buttons do: accept (queue the moment for ``/learn``) or dismiss.

Accepting writes nothing to the journal and starts nothing: it appends a marker to the inbox
(``capture.accept``), and ``/learn`` with no topic — in Claude Code or ``journal-agent
learn`` — offers accepted moments first, writes the entry with the user there to see it, and
marks the moment written. The moment stays in the inbox until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from journal_agent.errors import UserError
from journal_agent.view.learning import linked_text
from journal_agent.view.site import Site, code_path, record_path, relative

if TYPE_CHECKING:
    from journal_agent.capture.inbox import Moment

PAGE = "inbox.html"


def page(site: Site) -> dict[str, Any]:
    moments = []
    for moment in site.ws.inbox.read():
        files = []
        for edit in moment.files:
            target = site.files.readable(edit.path)
            first = edit.lines[0] if edit.lines else None
            fragment = "" if first is None else f"#L{first[0]}-{first[1]}"
            href = relative(PAGE, code_path(target)) + fragment if target else None
            files.append((edit.spec(), href))
        moments.append(
            {
                "moment": moment,
                # Its file:line references and [m:id] citations are links, as in an entry.
                "html": linked_text(site, PAGE, moment.text),
                "files": files,
                "records": [(r, relative(PAGE, record_path(r))) for r in moment.records],
            }
        )
    return {"moments": moments}


def accept(site: Site, moment_id: str) -> dict[str, Any]:
    """Queue a waiting moment for ``/learn``: marked accepted, offered first."""
    moment = _find(site, moment_id)
    site.ws.inbox.accept(moment.id)
    return {"id": moment.id, "accepted": True}


def dismiss(site: Site, moment_id: str) -> dict[str, Any]:
    moment = _find(site, moment_id)
    site.ws.inbox.dismiss(moment.id)
    return {"id": moment.id, "dismissed": True}


def _find(site: Site, moment_id: str) -> Moment:
    # Only a full id: a position or a prefix could name another moment by the time it acts.
    try:
        moment = site.ws.inbox.find(moment_id)
    except KeyError as exc:
        raise UserError(f"{exc.args[0]}; reload the inbox.") from None
    if moment.id != moment_id:
        raise UserError(f"no waiting moment has the id {moment_id!r}; reload the inbox.")
    return moment
