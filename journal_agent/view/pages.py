"""Every page of the view as HTML, from Jinja2 templates (autoescaped), for a site path.

The server and the static export call the same methods; ``live`` says which (a live page
polls for changes and can post ratings; an exported one is read-only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from markupsafe import Markup

from journal_agent.journal.model import Entry
from journal_agent.journal.refs import CodeRef, FileCache
from journal_agent.view import markdown, records
from journal_agent.view.files import Refused
from journal_agent.view.site import (
    Site,
    Summary,
    code_path,
    entry_path,
    record_path,
    relative,
    tag_path,
)

if TYPE_CHECKING:
    from jinja2 import Environment

    from journal_agent.journal.search.related_all import Related
    from journal_agent.view.refstate import RefState
    from journal_agent.view.site import Stub
    from profiling.records import MeasurementRecord

_TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class EntryLinks:
    """What an export computes once for all entries: backlinks, related entries (each a
    function of the entry giving entries with .id, .title, .date), and one file cache."""

    files: FileCache
    backlinks: Callable[[Entry], list[Summary]]
    related: Callable[[Entry], list[Related]] | None = None


class NotFound(Exception):
    """No such page; the message says what was asked for."""


@dataclass
class Mode:
    live: bool  # served (polls for changes, posts ratings) or exported (read-only files)
    csrf: str = ""


def environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(_TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(entry_path=entry_path, record_path=record_path, tag_path=tag_path)
    env.filters["md"] = lambda text: Markup(markdown.inline(text))
    return env


class Pages:
    def __init__(self, site: Site, mode: Mode) -> None:
        self.site = site
        self.mode = mode
        self.env = environment()
        # An export reads each record once (a snapshot); the server at every request.
        self._records: dict[str, tuple[bool, MeasurementRecord | None]] | None = (
            None if mode.live else {}
        )

    def _record(self, record_id: str) -> tuple[bool, MeasurementRecord | None]:
        """Whether the record exists, and its parsed contents (None when unreadable)."""
        if self._records is not None and record_id in self._records:
            return self._records[record_id]
        found = self.site.ws.records.exists(record_id)
        held = (found, records.load(self.site.ws.records, record_id) if found else None)
        if self._records is not None:
            self._records[record_id] = held
        return held

    def _render(
        self, template: str, path: str, watch: Sequence[str] = (), **context: object
    ) -> str:
        base = relative(path, "")
        # A live page compares api/stamp with the stamp of what it was made from. Taken here,
        # just after the files were read, not by the page's first poll: an edit made while the
        # page loads would otherwise become its baseline and never reload it.
        stamp = self.site.stamp(watch) if self.mode.live else ""
        return self.env.get_template(template).render(
            base=base,
            live=self.mode.live,
            csrf=self.mode.csrf,
            page=path,
            watch=list(watch),
            stamp=stamp,
            **context,
        )

    # -- the journal ----------------------------------------------------------------------

    def journal(self, page: int = 1) -> str:
        entries, pages = self.site.page_of_entries(page)
        if not 1 <= page <= pages:
            raise NotFound(f"the journal has {pages} page(s), not {page}")
        path = journal_page(page)
        return self._render(
            "journal.html",
            path,
            groups=_by_date(entries),
            tags=self.site.tag_counts(60),
            number=page,
            pages=[(n, relative(path, journal_page(n))) for n in range(1, pages + 1)],
            total=self.site.count(),
            # The live page asks for them once shown (working them out reads the whole journal);
            # an export lists them on its first page.
            disagreements=None if self.mode.live or page != 1 else self.site.disagreements(),
        )

    def tag(self, tag: str) -> str:
        entries = self.site.tagged(tag)
        if not entries:
            raise NotFound(f"no entry has the tag #{tag}")
        return self._render("tag.html", tag_path(tag), tag=tag, groups=_by_date(entries))

    # -- an entry -------------------------------------------------------------------------

    def entry(self, name: str, links: EntryLinks | None = None) -> str:
        """The page ``entries/<name>.html``; an export passes what it computed for all."""
        entry = self.site.entry_named(name)
        if entry is None:
            raise NotFound(f"no entry has the id {name!r}")
        return self.entry_page(entry, links)

    def entry_page(self, entry: Entry, links: EntryLinks | None = None) -> str:
        files = links.files if links else None
        path = entry_path(entry.id)
        states = self.site.ref_states(entry, self.site.recorded_hashes(), files)
        # The renderer's line numbers are the text's, the entry's the journal's: match by spec.
        # A reference moved to another file has its new path in its state: key by the written one.
        by_spec = {_spec(r): s for r, s in zip(entry.refs, states, strict=True)}
        targets = {key: self.site.ref_target(s.ref) for key, s in by_spec.items()}

        def ref_link(ref: CodeRef) -> markdown.Link | None:
            state, target = by_spec.get(_spec(ref)), targets.get(_spec(ref))
            if state is None or target is None:
                return None
            href = f"{relative(path, code_path(target))}#{state.fragment}"
            return markdown.Link(href, f"ref ref-{state.state}", f"{state.state}: {state.detail}")

        def cite_link(record_id: str) -> markdown.Link | None:
            if not self._record(record_id)[0]:
                return None
            return markdown.Link(relative(path, record_path(record_id)), "cite")

        html = markdown.render(entry.raw, ref_link, cite_link)
        return self._render(
            "entry.html",
            path,
            entry=entry,
            html=html,
            refs=[(s, targets[_spec(r)]) for r, s in zip(entry.refs, states, strict=True)],
            citations=self._citations(entry),
            backlinks=links.backlinks(entry) if links else self.site.backlinks(entry),
            # The live page asks for its related entries once it has loaded (api/related); an
            # export ranked every entry's at once.
            related=links.related(entry) if links and links.related else None,
            related_api=None if links else f"api/related?id={quote(entry.id, safe='')}",
            disagreements=None if self.mode.live else self.site.disagreements(entry.id),
            disagree_api=f"api/disagreements?id={quote(entry.id, safe='')}",
            code_path=code_path,
            # The code the states are read from: the live page reloads when it changes.
            watch=sorted({r.path for r in entry.refs} | {s.ref.path for s in states}),
        )

    def _citations(self, entry: Entry) -> list[tuple[str, MeasurementRecord | None]]:
        seen: dict[str, MeasurementRecord | None] = {}
        for cit in entry.citations:
            if cit.record_id not in seen:
                seen[cit.record_id] = self._record(cit.record_id)[1]
        return list(seen.items())

    # -- code, records --------------------------------------------------------------------

    def code(self, rel: str, citing: Sequence[tuple[Entry | Stub, RefState]] | None = None) -> str:
        """A workspace file with line numbers; the references into it with their states
        (an export passes those it collected)."""
        shown = self.site.files.read(rel)  # Refused: outside the workspace, a secret, …
        path = code_path(shown.rel)
        return self._render(
            "code.html",
            path,
            rel=shown.rel,
            lines=shown.text.splitlines(),
            citing=self.site.citing(shown.rel) if citing is None else citing,
            watch=[shown.rel],
        )

    def record(self, record_id: str) -> str:
        record = records.load(self.site.ws.records, record_id)
        if record is None:
            raise NotFound(f"no readable measurement record has the id {record_id!r}")
        return self._render("record.html", record_path(record_id), **records.page(record))

    def records_list(self) -> str:
        return self._render(
            "records.html", RECORDS_PAGE, **records.listing(self.site.ws.root, self.site.ws.records)
        )

    # -- learning -------------------------------------------------------------------------

    def ledger(self) -> str:
        from journal_agent.view import learning

        return self._render(
            "ledger.html", "ledger.html", **learning.ledger_page(self, "ledger.html")
        )

    def review(self) -> str:
        from journal_agent.view import learning

        return self._render("review.html", "review.html", **learning.review_page(self.site))

    def inbox(self) -> str:
        from journal_agent.view import drafts, inbox

        context = {**inbox.page(self.site), **drafts.page(self.site)}
        return self._render("inbox.html", inbox.PAGE, **context)

    def error(self, status: int, message: str, path: str = "error.html") -> str:
        """The error page shown at ``path`` (its links are made relative to it)."""
        return self._render("error.html", path, status=status, message=message)


RECORDS_PAGE = "records.html"  # every record (records/ID.html: one of them)


def journal_page(number: int) -> str:
    return "index.html" if number == 1 else f"pages/{number}.html"


def _by_date(entries: list[Summary]) -> list[tuple[str, list[Summary]]]:
    groups: list[tuple[str, list[Summary]]] = []
    for entry in entries:
        if groups and groups[-1][0] == entry.date:
            groups[-1][1].append(entry)
        else:
            groups.append((entry.date, [entry]))
    return groups


def _spec(ref: CodeRef) -> tuple[str, int, int]:
    return (ref.path, ref.start, ref.end)


__all__ = ["Mode", "NotFound", "Pages", "Refused", "journal_page"]
