"""What the pages show, read from the workspace: the journal (parsed once per change of the
file), entries with their references' states, backlinks and related entries, the code a
reference cites. Shared by the server and the static export; nothing here renders HTML.

Every page has a path relative to the site's root (``index.html``, ``entries/<id>.html``,
``code/<path>.html``, ``records/<id>.html``); links are made relative to the page holding
them, so the same pages work from the server and from ``file://``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from journal_agent.journal.links import links_to
from journal_agent.journal.model import Entry
from journal_agent.journal.refs import Anchor, CodeRef, FileCache
from journal_agent.paths import drafts_dir
from journal_agent.view.files import Refused, WorkspaceFiles
from journal_agent.view.refstate import RefState, ref_state

if TYPE_CHECKING:
    from journal_agent.workspace import Workspace

logger = logging.getLogger(__name__)

PAGE_SIZE = 200  # entries per journal page
MAX_WATCHED = 100  # workspace files one page's poll asks about
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}$")
_ALNUM = re.compile(r"[^\W_]+")


def entry_name(entry_id: str) -> str:
    """The file name of an entry's page: its id, or for an id that is not a plain file name
    (a hand-written ``<!-- entry: a/../b -->``) a hash of it, never a path."""
    if _SAFE_NAME.match(entry_id):
        return entry_id
    return "_" + hashlib.sha256(entry_id.encode()).hexdigest()[:16]


def entry_path(entry_id: str) -> str:
    return f"entries/{entry_name(entry_id)}.html"


def code_path(rel: str) -> str:
    return "code/" + "/".join(quote(part) for part in rel.split("/")) + ".html"


def record_path(record_id: str) -> str:
    return f"records/{record_id}.html"


def tag_path(tag: str) -> str:
    return f"tags/{quote(tag, safe='')}.html"


def relative(from_page: str, target: str) -> str:
    """``target`` (a site path) as a link from the page at ``from_page``."""
    return "../" * from_page.count("/") + target


@dataclass(frozen=True)
class Summary:
    """One entry as lists show it, from the search index (no markdown parsed)."""

    id: str
    title: str
    date: str
    line: int
    tags: tuple[str, ...] = ()


_ROWS = "SELECT e.rowid, e.id, e.title, e.date, e.line FROM entries e"


class Site:
    """One workspace's pages' data; safe to share between the server's threads.

    Lists come from the journal's search index (``journal.search.index``: kept in line with
    the markdown incrementally, one row per entry with its byte range); an entry page parses
    only that entry's bytes. So a 10,000-entry journal is never held in memory.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws  # the stores: journal, index, ledger, review, inbox, records, refs
        self.root = ws.root
        self.files = WorkspaceFiles(self.root)
        self._lock = threading.Lock()
        self._hashes: tuple[tuple[int, int], Mapping[str, dict[str, Anchor]]] | None = None
        # An export decides each path once (a snapshot); the server decides at every request.
        self.targets: dict[str, str | None] | None = None
        self._sums: tuple[tuple[int, int], tuple[int, list[tuple[str, int]]]] | None = None
        self._disagree: tuple[str, list[dict[str, Any]]] | None = None

    # -- what changed ---------------------------------------------------------------------

    def watched(self) -> list[Path]:
        ws = self.ws
        return [
            ws.journal.path,
            ws.ledger.path,
            ws.refs.path,
            ws.review.path,
            ws.measurements,
            ws.inbox.path,
            drafts_dir(self.root),  # a draft written, accepted or rejected (each a rename)
        ]

    def stamp(self, files: Iterable[str] = ()) -> str:
        """Changes whenever a file a page shows changes (size and mtime, no reading): the
        stores, and ``files``, the workspace files the page shows (an entry's cited code, a
        code page's file; those the view may not show count as absent)."""
        paths: list[Path | None] = [*self.watched()]
        for rel in list(files)[:MAX_WATCHED]:
            try:
                paths.append(self.files.resolve(rel))
            except Refused:
                paths.append(None)
        parts = []
        for path in paths:
            try:
                st = path.stat() if path is not None else None
            except OSError:
                st = None
            parts.append(f"{st.st_size}.{st.st_mtime_ns}" if st else "-")
        return "/".join(parts)

    # -- the journal, through its index ---------------------------------------------------

    @contextlib.contextmanager
    def _index(self) -> Iterator[sqlite3.Connection]:
        """A connection to the search index, brought up to date with the markdown."""
        if not self.ws.journal.exists():
            yield sqlite3.connect(":memory:")  # no journal: every list is empty
            return
        index = self.ws.index
        conn = index.connect()
        try:
            index.ensure_fresh(conn)
            yield conn
        finally:
            conn.close()

    def _summaries(self, conn: sqlite3.Connection, sql: str, params: tuple = ()) -> list[Summary]:
        try:
            rows = conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # the empty stand-in of a workspace without a journal
            return []
        tags: dict[int, list[str]] = defaultdict(list)
        for start in range(0, len(rows), 500):
            chunk = [r[0] for r in rows[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            for entry, tag in conn.execute(
                f"SELECT entry, tag FROM tags WHERE entry IN ({marks}) ORDER BY rowid", chunk
            ):
                tags[entry].append(tag)
        return [Summary(r[1], r[2], r[3], r[4], tuple(tags[r[0]])) for r in rows]

    def _journal_key(self) -> tuple[int, int]:
        st = self.ws.journal.stat()
        return (st.st_size, st.st_mtime_ns) if st is not None else (-1, 0)

    def _aggregates(self) -> tuple[int, list[tuple[str, int]]]:
        """The number of entries and every tag's count: whole-journal sums, so computed once
        per version of the journal file (its size and mtime), not per page."""
        key = self._journal_key()
        with self._lock:
            if self._sums is not None and self._sums[0] == key:
                return self._sums[1]
        with self._index() as conn:
            try:
                count = int(conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
                sql = "SELECT tag, COUNT(*) AS n FROM tags GROUP BY tag ORDER BY n DESC, tag"
                tags = [(str(t), int(n)) for t, n in conn.execute(sql)]
            except sqlite3.OperationalError:
                count, tags = 0, []
        with self._lock:
            self._sums = (key, (count, tags))
        return count, tags

    def count(self) -> int:
        return self._aggregates()[0]

    def tag_counts(self, limit: int | None = None) -> list[tuple[str, int]]:
        tags = self._aggregates()[1]
        return tags if limit is None else tags[:limit]

    def page_of_entries(self, page: int) -> tuple[list[Summary], int]:
        """The entries of one journal page, newest first, and the number of pages."""
        total = self.count()
        with self._index() as conn:
            sql = f"{_ROWS} ORDER BY e.date DESC, e.line DESC LIMIT ? OFFSET ?"
            rows = self._summaries(conn, sql, (PAGE_SIZE, (page - 1) * PAGE_SIZE))
        return rows, max(1, -(-total // PAGE_SIZE))

    def tagged(self, tag: str) -> list[Summary]:
        sql = (
            f"{_ROWS} WHERE e.rowid IN (SELECT entry FROM tags WHERE tag = ?) "
            "ORDER BY e.date DESC, e.line DESC"
        )
        with self._index() as conn:
            return self._summaries(conn, sql, (tag,))

    def summaries(self) -> list[Summary]:
        """Every entry, newest first."""
        with self._index() as conn:
            return self._summaries(conn, f"{_ROWS} ORDER BY e.date DESC, e.line DESC")

    def _parse(self, data: bytes, row: tuple, offset: int = 0) -> Entry | None:
        """The entry of an index row ``(id, line, start, size)``, parsed from its bytes
        (``data`` holds the journal from byte ``offset`` on)."""
        from journal_agent.journal.model import parse_journal

        entry_id, line, start, size = row
        start -= offset
        text = data[start : start + size].decode("utf-8", errors="replace")
        entries = parse_journal(text).entries
        if not entries:
            return None
        entry = entries[0]
        entry.id, entry.start_line = entry_id, line
        return entry

    def _parse_rows(self, rows: list[tuple]) -> list[Entry]:
        """The entries of a few index rows, reading only their bytes: a page shows one entry
        and a few others, and reading the whole journal (14 MB at 10,000 entries) for each
        page left that much freed heap in the server's memory after every page."""
        return list(self.entries(rows))

    def entry(self, entry_id: str) -> Entry | None:
        with self._index() as conn:
            try:
                row = conn.execute(
                    "SELECT id, line, start, size FROM entries WHERE id = ?", (entry_id,)
                ).fetchone()
            except sqlite3.OperationalError:
                return None
            found = [] if row is None else self._parse_rows([row])
            return found[0] if found else None

    def entry_named(self, name: str) -> Entry | None:
        """The entry whose page is ``entries/<name>.html``."""
        if _SAFE_NAME.match(name):
            return self.entry(name)
        with self._index() as conn:
            try:
                ids = [i for (i,) in conn.execute("SELECT id FROM entries")]
            except sqlite3.OperationalError:
                return None
        found = [i for i in ids if entry_name(i) == name]
        return self.entry(found[0]) if found else None

    def entry_rows(self) -> list[tuple[str, int, int, int]]:
        """``(id, line, start, size)`` of every entry, in journal order."""
        with self._index() as conn:
            try:
                sql = "SELECT id, line, start, size FROM entries ORDER BY start"
                return [tuple(r) for r in conn.execute(sql)]
            except sqlite3.OperationalError:
                return []

    def entries(self, rows: list[tuple[str, int, int, int]] | None = None) -> Iterator[Entry]:
        """Every entry (or those of ``rows``), parsed one at a time: an export walks them all."""
        rows = self.entry_rows() if rows is None else rows
        if not rows or not self.ws.journal.exists():  # (an index left from a journal gone)
            return
        # Each entry's bytes, not the journal; through the store (never a link, a change by
        # another hand said once).
        with self.ws.journal.open_bytes() as data:
            for row in rows:
                entry = self._parse(data[row[2] : row[2] + row[3]], row, offset=row[2])
                if entry is not None:
                    yield entry

    def _candidates(self, words: list[str], limit: int = 300) -> list[Entry]:
        """Entries whose text holds these words as a phrase (a superset; callers decide)."""
        if not words:
            return []
        phrase = '"' + " ".join(words) + '"'
        sql = (
            "SELECT e.id, e.line, e.start, e.size FROM entries e WHERE e.rowid IN "
            "(SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?) LIMIT ?"
        )
        with self._index() as conn:
            try:
                rows = conn.execute(sql, (f"body : {phrase}", limit)).fetchall()
            except sqlite3.OperationalError:
                return []
        return self._parse_rows(rows)

    def backlinks(self, entry: Entry) -> list[Entry]:
        """Entries whose 🔗 section links to ``entry`` (the journal's own ``links_to``), found
        among those whose text holds its title or its id (the index's full-text search)."""
        found: dict[str, Entry] = {}
        for text in (entry.title, entry.id):
            for source in self._candidates(_ALNUM.findall(text)):
                if source.id != entry.id and links_to(source, entry):
                    found[source.id] = source
        return sorted(found.values(), key=lambda e: e.start_line)

    def backlink_map(self) -> dict[str, list[str]]:
        """Every entry's backlinks at once (for an export): a target is a candidate for a
        source only when the first word of its title or id is a word of the source's 🔗
        section; ``links_to`` decides."""
        targets = [Stub(s.id, s.title) for s in self.summaries()]
        by_word: dict[str, list[Any]] = defaultdict(list)
        for target in targets:
            for text in {target.title, target.id}:
                first = _ALNUM.search(text)
                if first:
                    by_word[first.group().lower()].append(target)
        out: dict[str, list[str]] = defaultdict(list)
        for source in self.entries(self._rows_with_links()):
            section = source.section_text("related")
            words = {w.lower() for w in _ALNUM.findall(section)} if section else set()
            seen: set[str] = set()
            for word in words:
                for target in by_word.get(word, ()):
                    if target.id not in seen and links_to(source, target):
                        seen.add(target.id)
                        out[target.id].append(source.id)
        return out

    def _rows_with_links(self) -> list[tuple[str, int, int, int]]:
        """The rows of entries that can have a 🔗 Related Concepts section: its heading holds
        the emoji or the word "related" (``journal.sections``); the rest need no parsing."""
        rows = self.entry_rows()
        if not rows:
            return rows
        link = "🔗".encode()
        with self.ws.journal.open_bytes() as data:  # an entry's bytes at a time
            return [
                r
                for r in rows
                if link in (chunk := data[r[2] : r[2] + r[3]]) or b"related" in chunk.lower()
            ]

    def related(self, entry: Entry, limit: int = 5) -> list[Any]:
        """Entries like this one (the search index's ``related``, the entry's vector from the
        cache: what an export lists too); [] when it cannot say."""
        from journal_agent.journal.search.related_all import related

        try:
            return related(self.root, entry.id, entry.raw, limit)
        except Exception as exc:  # a broken index must not break the page
            logger.debug("related entries of %s not shown: %r", entry.id, exc)
            return []

    # -- references -----------------------------------------------------------------------

    def recorded_hashes(self) -> Mapping[str, dict[str, Anchor]]:
        """``.journal/refs.jsonl``'s anchors, read again only when it changed."""
        path = self.ws.refs.path
        try:
            st = path.stat()
            key: tuple[int, int] = (st.st_size, st.st_mtime_ns)
        except OSError:
            key = (-1, 0)
        with self._lock:
            if self._hashes is None or self._hashes[0] != key:
                self._hashes = (key, self.ws.refs.anchors_on_disk())
            return self._hashes[1]

    def disagreements(self, entry_id: str | None = None) -> list[dict[str, Any]]:
        """The entries that disagree (``journal.api.disagreements``: contradictions and
        near-duplicates), with both entries' titles; those of one entry when ``entry_id`` is
        given. Worked out once per change of the journal, the anchors or the records."""
        key = self.stamp()
        with self._lock:
            held = self._disagree if self._disagree and self._disagree[0] == key else None
        if held is None:
            from journal_agent.journal import api

            found = []
            for p in api.disagreements(self.ws):
                one, other = self.entry(p.entry), self.entry(p.other or "")
                found.append(
                    {
                        "kind": p.kind,
                        "detail": p.detail,
                        "entry": p.entry,
                        "title": one.title if one else p.entry,
                        "other": p.other,
                        "other_title": other.title if other else p.other,
                        "href": entry_path(p.entry),
                        "other_href": entry_path(p.other or ""),
                    }
                )
            held = (key, found)
            with self._lock:
                self._disagree = held
        found = held[1]
        return [d for d in found if entry_id in (None, d["entry"], d["other"])]

    def ref_states(
        self,
        entry: Entry,
        recorded: Mapping[str, dict[str, Anchor]],
        files: FileCache | None = None,
    ) -> list[RefState]:
        """Each reference's state; ``files`` may be shared by calls that see the same files
        (an export), else the files are read afresh."""
        files = files or FileCache(self.root)
        mine = recorded.get(entry.id, {})
        return [ref_state(ref, files, mine) for ref in entry.refs]

    def ref_target(self, ref: CodeRef) -> str | None:
        """The workspace-relative path a reference's link opens, or None (refused, missing)."""
        if self.targets is None:
            return self.files.readable(ref.path)
        if ref.path not in self.targets:
            self.targets[ref.path] = self.files.readable(ref.path)
        return self.targets[ref.path]

    def citing(self, rel: str) -> list[tuple[Entry, RefState]]:
        """The references into the file ``rel`` of every entry that cites it, with states."""
        recorded = self.recorded_hashes()
        files = FileCache(self.root)
        targets: dict[str, str | None] = {}
        out = []
        for entry in sorted(self._candidates(_ALNUM.findall(rel)), key=lambda e: e.start_line):
            for state in self.ref_states(entry, recorded, files):
                path = state.ref.path
                if path not in targets:
                    targets[path] = self.files.readable(path)
                if targets[path] == rel:
                    out.append((entry, state))
        return out


@dataclass(frozen=True)
class Stub:
    """What ``links_to`` reads of a target: its id and title."""

    id: str
    title: str
