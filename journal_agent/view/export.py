"""Exports: the view's pages as static files (``file://``, relative links), the review cards
as an Anki deck (the cited code on the back), everything as one JSON document.

An export never writes over anything: the HTML goes into a new or empty directory, the deck
and the JSON into a new file (with ``--force``, they replace only the file named, atomically),
through :mod:`journal_agent.confined`: the folder the user named is trusted as given, the name
in it is never followed as a link, and a temp file beside it has a random name that nothing can
plant in advance.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.journal.refs import FileCache
from journal_agent.view.files import Refused
from journal_agent.view.pages import EntryLinks, Mode, NotFound, Pages, journal_page
from journal_agent.view.site import Site, Stub, code_path, entry_path, record_path, tag_path

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from journal_agent.journal.model import Entry
    from journal_agent.learning.ledger_summary import LedgerSummary
    from journal_agent.view.refstate import RefState
    from journal_agent.view.site import Summary
    from journal_agent.workspace import Workspace

STATIC = Path(__file__).parent / "static"
# Anki identifies a deck and a note type by number: fixed, so a re-import updates the notes.
ANKI_DECK_ID = 1_743_026_026
ANKI_MODEL_ID = 1_743_026_027


@dataclass
class Exported:
    pages: int


def export_html(ws: Workspace, directory: Path) -> Exported:
    """The site, written beside ``directory`` and renamed onto it once complete: an export
    that fails (a ledger that is not UTF-8, a full disk) leaves no half site behind."""
    directory = Path(directory)
    target = directory.absolute()
    odd = confined.problem(target.parent, target.name, folder=True)
    if odd is not None:  # a link where the site goes: never followed
        raise UserError(odd)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UserError(f"{directory} is not an empty directory; give a new one to export into.")
    target.parent.mkdir(parents=True, exist_ok=True)
    building = target.parent / f".{target.name}.export-{secrets.token_hex(4)}"
    building.mkdir()  # with the user's umask, as the site will have it
    try:
        exported = _export_html(ws, building)
        try:
            os.replace(building, target)  # onto an empty directory, or none
        except OSError as exc:
            raise UserError(
                f"{directory} could not take the export ({exc.strerror}); "
                "give a new directory to export into."
            ) from None
    finally:
        shutil.rmtree(building, ignore_errors=True)  # gone once renamed
    return exported


def _export_html(ws: Workspace, directory: Path) -> Exported:
    site = Site(ws)
    pages = Pages(site, Mode(live=False))
    writer = _Writer(directory)
    _, count = site.page_of_entries(1)
    for n in range(1, count + 1):
        writer.write(journal_page(n), pages.journal(n))
    for tag, _ in site.tag_counts():
        writer.write(tag_path(tag), pages.tag(tag))
    site.targets = {}  # each path decided once for the whole export
    citing = _write_entries(site, pages, _links(site), writer)
    for rel in sorted(citing):
        try:
            writer.write(code_path(rel), pages.code(rel, citing[rel]))
        except Refused:
            continue  # changed since it was checked: the link shows no page
    for record in site.ws.records.list():
        try:
            writer.write(record_path(record.id), pages.record(record.id))
        except NotFound:
            continue
    writer.write("records.html", pages.records_list())
    writer.write("ledger.html", pages.ledger())
    writer.write("review.html", pages.review())
    writer.write("inbox.html", pages.inbox())
    writer.write("search-index.js", _search_index(site))
    shutil.copytree(STATIC, directory / "static", dirs_exist_ok=True)
    return Exported(writer.count)


# What the entry pages' workers share (fork): set by _write_entries, read by _entry_pages.
_JOB: dict[str, Any] = {}
PARALLEL_FROM = 1000  # entries: below this, one process is faster than starting workers
CHUNK = 250


def _write_entries(site: Site, pages: Pages, links: EntryLinks, writer: _Writer) -> dict:
    """Every entry page, in parallel on a large journal; the references into each file (for
    the code pages). Pages are independent files, so workers write their own."""
    rows = site.entry_rows()
    workers = min(os.cpu_count() or 1, 8) if len(rows) >= PARALLEL_FROM else 1
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        workers = 1
    _JOB.update(site=site, pages=pages, links=links, directory=writer.directory)
    try:
        chunks = [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]
        if workers == 1:
            results = [_entry_pages(chunk) for chunk in chunks]
        else:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                results = pool.map(_entry_pages, chunks)
    finally:
        _JOB.clear()
    citing: dict[str, list[tuple[Stub, RefState]]] = defaultdict(list)
    for count, found in results:
        writer.count += count
        for target, who, state in found:
            citing[target].append((who, state))
    return citing


def _entry_pages(rows: list[tuple[str, int, int, int]]) -> tuple[int, list[tuple]]:
    site, pages, links = _JOB["site"], _JOB["pages"], _JOB["links"]
    writer = _Writer(_JOB["directory"])
    recorded = site.recorded_hashes()
    found = []
    for entry in site.entries(rows):
        writer.write(entry_path(entry.id), pages.entry_page(entry, links))
        for state in site.ref_states(entry, recorded, links.files):
            target = site.ref_target(state.ref)
            if target is not None:
                found.append((target, Stub(entry.id, entry.title), state))
    return writer.count, found


def _links(site: Site) -> EntryLinks:
    """Backlinks for all entries, in one pass over the journal; related entries, ranked with
    what every entry shares worked out once (``journal.search.related_all``)."""
    from journal_agent.journal.search.related_all import RelatedAll

    summaries = {s.id: s for s in site.summaries()}
    backlinks = site.backlink_map()

    def linked(entry: Entry) -> list[Summary]:
        return [summaries[i] for i in backlinks.get(entry.id, []) if i in summaries]

    if not summaries:
        return EntryLinks(FileCache(site.root), linked)
    ranked = RelatedAll(site.root)
    return EntryLinks(FileCache(site.root), linked, lambda e: ranked.of(e.id, e.raw))


class _Writer:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = 0

    def write(self, site_path: str, text: str) -> None:
        from urllib.parse import unquote

        # Into the folder this export made (random name); a cache need not be durable.
        confined.replace(self.directory, unquote(site_path), text, durable=False)
        self.count += site_path.endswith(".html")


def _search_index(site: Site) -> str:
    """Titles, dates and tags for the exported journal page's search (a script, since a
    ``file://`` page may not fetch a JSON file)."""
    rows = [
        {"title": e.title, "date": e.date, "tags": list(e.tags), "href": entry_path(e.id)}
        for e in site.summaries()
    ]
    return "window.JOURNAL_INDEX = " + json.dumps(rows, ensure_ascii=True) + ";\n"


# -- JSON -----------------------------------------------------------------------------------


def export_json(ws: Workspace) -> dict[str, Any]:
    """Entries, records, ledger and review cards as one dict (a library caller's; the CLI
    writes :class:`JsonExport`'s pieces, never holding the entries)."""
    site = Site(ws)
    rest = _rest_json(site)
    return {"entries": list(_entries_json(site)), **rest, "review": list(rest["review"])}


class JsonExport:
    """The text of ``json.dumps(export_json(ws), indent=2, ensure_ascii=False)``, in pieces:
    one entry at a time (a 100 MB journal's entries, held as one list, took gigabytes).
    ``entries`` counts those given so far."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.entries = 0

    def __iter__(self) -> Iterator[str]:
        site = Site(self.ws)
        yield '{\n  "entries": ['
        for entry in _entries_json(site):
            # A nested value's lines are its own json.dumps indented one level per depth (a
            # newline is never raw inside a JSON string).
            yield ",\n    " if self.entries else "\n    "
            yield _dumps(entry).replace("\n", "\n    ")
            self.entries += 1
        yield "\n  ]" if self.entries else "]"
        for key, value in _rest_json(site).items():
            yield f",\n  {json.dumps(key)}: "
            if key != "review":
                yield _dumps(value).replace("\n", "\n  ")
                continue
            first = True  # every card of the journal: one at a time too
            for card in value:
                yield ("[\n    " if first else ",\n    ") + _dumps(card).replace("\n", "\n    ")
                first = False
            yield "[]" if first else "\n  ]"
        yield "\n}"


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _entries_json(site: Site) -> Iterator[dict[str, Any]]:
    recorded = site.recorded_hashes()
    files = FileCache(site.root)
    backlinks = site.backlink_map()
    for entry in site.entries():
        states = site.ref_states(entry, recorded, files)
        yield {
            **entry.summary(),
            "refs": [_ref_json(site, s) for s in states],
            "citations": sorted({c.record_id for c in entry.citations}),
            "backlinks": backlinks.get(entry.id, []),
            "markdown": entry.raw,
        }


def _rest_json(site: Site) -> dict[str, Any]:
    from journal_agent.learning import review

    return {
        "records": [r.model_dump(mode="json") for r in site.ws.records.list()],
        "ledger": _ledger(site),
        "review": (c.to_dict() for c in review.every_card(site.ws)),
    }


def _ref_json(site: Site, state: RefState) -> dict[str, Any]:
    """A reference's state; a secret or denied file's is "hidden", as on its page (fresh or
    changed would tell whether the secret changed)."""
    if state.state != "gone" and site.ref_target(state.ref) is None:
        detail = "not shown: a secret or denied file"
        return {"ref": state.ref.key, "state": "hidden", "detail": detail, "line": state.ref.line}
    return {
        "ref": state.ref.key,
        "state": state.state,
        "detail": state.detail,
        "line": state.ref.line,
    }


def _ledger(site: Site) -> LedgerSummary | None:
    store = site.ws.ledger
    return store.load().summary() if store.exists() else None


# -- Anki -----------------------------------------------------------------------------------


def save_export(file: Path, data: bytes | Iterable[bytes], *, force: bool = False) -> None:
    """Write an export file: never over one that exists (as ``export html`` never writes over
    a directory that holds files) unless ``force``; whole or not at all either way (``data``
    may come in pieces, written as they come). The folder the user named is trusted as given
    (and made); the file's own name is never followed."""
    out = Path(file).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    odd = confined.problem(out.parent, out.name)
    if odd is not None:  # a link, a FIFO: named as what it is, --force or not
        raise UserError(odd)
    if force:
        confined.replace(out.parent, out.name, data)
        return
    if not confined.create(out.parent, out.name, data):  # O_EXCL: fails if the name is taken
        raise UserError(f"{file} exists; give a new file name, or --force to replace it.")


def export_anki(ws: Workspace, file: Path, *, force: bool = False) -> int:
    """Every review item as a note; an entry's back holds the code its references cite."""
    try:
        import genanki
    except ImportError:
        raise UserError("export anki needs genanki: pip install 'journal-agent[view]'.") from None
    from journal_agent.learning import review
    from journal_agent.view.markdown import render

    site = Site(ws)
    model = genanki.Model(
        ANKI_MODEL_ID,
        "journal-agent card",
        fields=[{"name": "Question"}, {"name": "Answer"}, {"name": "Code"}],
        templates=[
            {
                "name": "Card",
                "qfmt": "{{Question}}",
                "afmt": "{{FrontSide}}<hr id=answer>{{Answer}}{{Code}}",
            }
        ],
        css="pre { text-align: left; font-size: 12px; background: #f6f8fa; padding: 6px; }",
    )
    deck = genanki.Deck(ANKI_DECK_ID, "journal-agent")
    count = 0
    for item in review.iter_items(site.ws):
        fields = [_plain(render, item.question), _plain(render, item.answer), _code(site, item)]
        deck.add_note(genanki.Note(model=model, fields=fields, guid=genanki.guid_for(item.id)))
        count += 1
    import io

    deck_bytes = io.BytesIO()  # a deck is small; no file of a name anyone could plant first
    genanki.Package(deck).write_to_file(deck_bytes)
    save_export(file, deck_bytes.getvalue(), force=force)
    return count


def _plain(render: Any, text: str) -> str:
    return render(text, lambda _: None, lambda _: None)


def _code(site: Site, item: Any) -> str:
    """The lines an entry's references cite, as they are now (a moved reference's new lines, a
    changed one's likely place with its diff, and the question whether the explanation still
    holds), from readable files only (``learning.review_code``)."""
    from markupsafe import escape

    from journal_agent.view.learning import card_code

    if item.kind != "entry":
        return ""
    code = card_code(site, item.id)
    if code is None:
        return ""
    parts = []
    for r in code["refs"]:
        if r["state"] in ("gone", "hidden"):
            parts.append(f"<p><code>{escape(r['ref'])}</code> ({escape(r['detail'])})</p>")
            continue
        note = "" if r["state"] in ("fresh", "unrecorded") else f" ({r['detail']})"
        shown = r["diff"] or r["lines"]
        where = r["ref"] if r["state"] == "fresh" else f"{r['ref']} → {r['path']}:{r['start']}"
        parts.append(
            f"<p><code>{escape(where)}</code>{escape(note)}</p>"
            f"<pre>{escape(chr(10).join(shown))}</pre>"
        )
    if code["changed"]:
        parts.append(
            "<p><b>The code changed since this entry was written. Does the explanation still "
            "hold?</b> Answer it in <code>journal-agent review</code> (it records the code as it "
            "is now, or leaves the entry to revise in the inbox).</p>"
        )
    return "".join(parts)
