"""The search index over the journal: SQLite FTS5 under ``.journal/index.sqlite``.

The index is a cache of the markdown. It records the journal's size and mtime and, per entry,
its byte range and hash; when the file changed, the entries before and after the edit are
recognised by their hashes and only the edited stretch is parsed and re-indexed (a hand edit
of one entry of 10,000 costs milliseconds, not a rebuild). Appends add their one row in place.
Schema changes are append-only named migrations.

Ranking (``search``): the query is analysed into terms (``query.py``: stems, synonyms,
compounds, typos, Chinese); entries matching more terms come first, BM25 (title ×10, tags ×5)
orders them within; when the embeddings extra is installed, that list and the entries nearest
in meaning are fused by reciprocal rank (``fusion.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
from pathlib import Path

from journal_agent.errors import UserError
from journal_agent.journal._text import open_fence, split_lines
from journal_agent.journal.model import Entry, parse_journal
from journal_agent.journal.search import titles_file
from journal_agent.journal.search.hits import SNIPPET_WORDS, Hit, Lexical, one_line
from journal_agent.journal.search.query import (
    CJK_RUN,
    OPERATORS,
    QueryPlan,
    analyse,
    edit_distance,
    load_synonyms,
    vocabulary_cache,
)
from journal_agent.journal.search.schema import MIGRATIONS, open_migrated
from journal_agent.journal.store import JournalStore
from journal_agent.journal.stream import FileBytes
from journal_agent.paths import index_file

JournalBytes = bytes | FileBytes  # the journal as bytes, or read where needed


class _FullRebuild(Exception):
    """The edit cannot be re-indexed locally (ids could shift, a code block left open …)."""


class SearchIndex:
    def __init__(self, root: Path, cached: bool = False) -> None:
        self.root = Path(root)
        self.store = JournalStore(self.root)
        self.path = index_file(self.root)
        self.cached = cached  # rank words from phrases kept in memory (postings.py), not SQL
        # Why meaning was not used, after a search: per thread, since one index (a workspace's)
        # serves the MCP server's tool calls, which run in threads of their own.
        self._notes = threading.local()

    @property
    def semantic_note(self) -> str | None:
        """Why the last search in this thread did not (fully) use meaning; None when it did."""
        return getattr(self._notes, "note", None)

    @semantic_note.setter
    def semantic_note(self, note: str | None) -> None:
        self._notes.note = note

    def connect(self) -> sqlite3.Connection:
        return open_migrated(self.path, MIGRATIONS)  # (.journal/ made, never through a link)

    def _meta(self, conn: sqlite3.Connection) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    def _set_meta(self, conn: sqlite3.Connection, **values: object) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in values.items()]
        )

    def _bump(self, conn: sqlite3.Connection) -> None:
        """Entries changed: caches keyed by the generation are stale, the hooks' titles_file too."""
        meta = self._meta(conn)
        self._set_meta(conn, generation=int(meta.get("generation", "0")) + 1)
        rows = conn.execute("SELECT id, title FROM entries ORDER BY start")
        titles_file.write(self.root, int(meta["size"]), int(meta["mtime_ns"]), rows)

    def generation(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    # -- freshness ---------------------------------------------------------------------------
    def ensure_fresh(self, conn: sqlite3.Connection) -> None:
        """Bring the index in line with the markdown when the file changed since."""
        st = self.store.stat()
        if st is None:
            if self._meta(conn).get("size") != "-1":
                self._update(conn, b"", -1, -1)
            return
        meta = self._meta(conn)
        if meta.get("size") == str(st.st_size) and meta.get("mtime_ns") == str(st.st_mtime_ns):
            return
        # A file only touched re-parses its last entry: hashing all 14 MB to notice would cost
        # more than that. (Through the store: a change by another hand is said once, a journal
        # that is a link refused; the bytes are read where the edit is looked for.)
        with self.store.open_bytes() as data:
            self._update(conn, data, data.stat.st_size, data.stat.st_mtime_ns)

    def _update(self, conn: sqlite3.Connection, data: JournalBytes, size: int, mtime: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            meta = self._meta(conn)
            if (meta.get("size"), meta.get("mtime_ns")) == (str(size), str(mtime)):
                conn.execute("ROLLBACK")  # another process brought it up to date meanwhile
                return
            try:
                self._reindex_edited(conn, data, meta)
            except _FullRebuild:
                self._rebuild(conn, data)
            first = conn.execute("SELECT min(start) FROM entries").fetchone()[0]
            self._set_meta(
                conn,
                size=size,
                mtime_ns=mtime,
                preamble=hashlib.sha1(data[: first or 0]).hexdigest(),
            )
            self._bump(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _reindex_edited(self, conn: sqlite3.Connection, data: JournalBytes, meta: dict) -> None:
        """Re-index only the stretch of the file that changed, or raise :class:`_FullRebuild`."""
        rows = conn.execute(
            "SELECT rowid, id, start, size, hash, line, base FROM entries ORDER BY start"
        ).fetchall()
        if not rows or "size" not in meta or int(meta["size"]) < 0:
            raise _FullRebuild
        n, old_size = len(rows), int(meta["size"])

        def same(row: tuple, start: int) -> bool:
            end = start + row[3]
            return end <= len(data) and hashlib.sha1(data[start:end]).hexdigest() == row[4]

        # Entries before the edit sit where they were, byte for byte.
        p = 0
        if hashlib.sha1(data[: rows[0][2]]).hexdigest() == meta.get("preamble"):
            while p < n and same(rows[p], rows[p][2]):
                p += 1
        backed_off = p > 0
        if backed_off:
            p -= 1  # text added at the end of the last unchanged entry belongs to it
        mid_start = rows[p][2] if backed_off else 0
        # Entries after the edit sit where they were, shifted by the change in size.
        delta = len(data) - old_size
        j = n - 1
        lowest = p + 1 if backed_off else p
        while j >= lowest and rows[j][2] + delta >= mid_start and same(rows[j], rows[j][2] + delta):
            j -= 1
        mid_end = rows[j + 1][2] + delta if j + 1 < n else len(data)
        old_mid, unchanged = rows[p : j + 1], rows[:p] + rows[j + 1 :]
        region = data[mid_start:mid_end]
        try:
            text = region.decode("utf-8")
        except UnicodeDecodeError:
            raise _FullRebuild from None
        if open_fence(split_lines(text)):
            raise _FullRebuild  # a code block left open swallows the headings after it
        parsed = parse_journal(text)
        if mid_start > 0 and parsed.preamble:
            raise _FullRebuild  # the edit removed a heading: text joins the entry before
        # Ids derived from titles are numbered across the whole journal (-2, -3): when an
        # edited entry shares its base with another entry, only a full parse numbers it right.
        others = {row[6] for row in unchanged}
        if others & ({_base(e) for e in parsed.entries} | {row[6] for row in old_mid}):
            raise _FullRebuild
        for row in old_mid:
            self._delete(conn, row[0])
        if j + 1 < n:
            line_delta = data.count(b"\n", 0, mid_end) + 1 - rows[j + 1][5]
            conn.execute(
                "UPDATE entries SET start = start + ?, line = line + ? WHERE start >= ?",
                (delta, line_delta, rows[j + 1][2]),
            )
        first_line = data.count(b"\n", 0, mid_start)
        offset = mid_start + len(parsed.preamble.encode("utf-8", "surrogatepass"))
        for entry in parsed.entries:
            raw = entry.raw.encode("utf-8", "surrogatepass")
            entry.start_line += first_line
            self._insert(conn, entry, offset, raw)
            offset += len(raw)

    def _rebuild(self, conn: sqlite3.Connection, data: JournalBytes) -> None:
        """Parse the whole journal, an entry at a time; entries whose text did not change keep
        their rows."""
        known = {
            row[0]: (row[1], row[2]) for row in conn.execute("SELECT id, rowid, hash FROM entries")
        }
        seen: set[str] = set()
        updates = []
        for entry, offset, raw in self.store.entries_with_bytes(data):
            seen.add(entry.id)
            old = known.get(entry.id)
            if old is not None and old[1] == hashlib.sha1(raw).hexdigest():
                updates.append((entry.start_line, offset, _base(entry), old[0]))
            else:
                if old is not None:
                    self._delete(conn, old[0])
                self._insert(conn, entry, offset, raw)
        conn.executemany(
            "UPDATE entries SET line = ?, start = ?, base = ? WHERE rowid = ?", updates
        )
        for entry_id, (rowid, _) in known.items():
            if entry_id not in seen:
                self._delete(conn, rowid)

    def _delete(self, conn: sqlite3.Connection, rowid: int) -> None:
        conn.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM tags WHERE entry = ?", (rowid,))
        conn.execute("DELETE FROM entries_fts WHERE rowid = ?", (rowid,))

    def _insert(self, conn: sqlite3.Connection, entry: Entry, start: int, raw: bytes) -> int:
        from journal_agent.journal.search.embeddings import embed_text, text_key

        old = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry.id,)).fetchone()
        if old is not None:
            self._delete(conn, old[0])
        tags = entry.tags
        tags_text = " ".join(tags)
        body = entry.body
        cur = conn.execute(
            "INSERT INTO entries (id, title, date, line, hash, start, size, base, embed_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.id,
                entry.title,
                entry.date,
                entry.start_line,
                hashlib.sha1(raw).hexdigest(),
                start,
                len(raw),
                _base(entry),
                text_key(embed_text(entry.title, tags_text, body)),
            ),
        )
        rowid = int(cur.lastrowid or 0)
        conn.executemany("INSERT INTO tags VALUES (?, ?)", [(rowid, t) for t in tags])
        conn.execute(
            "INSERT INTO entries_fts (rowid, title, tags, body, cjk) VALUES (?, ?, ?, ?, ?)",
            (rowid, entry.title, tags_text, body, _cjk_chars(entry.title, body)),
        )
        return rowid

    def note_append(
        self, entry: Entry, old: tuple[int, int], new: tuple[int, int], data: bytes
    ) -> None:
        """After an append: add the one entry if the index was current before it."""
        conn = self.connect()
        try:
            meta = self._meta(conn)
            if (meta.get("size"), meta.get("mtime_ns")) != (str(old[0]), str(old[1])):
                return  # stale anyway: the next search re-indexes what changed
            raw = entry.raw.encode("utf-8", "surrogatepass")
            start = len(data) - len(raw)
            conn.execute("BEGIN IMMEDIATE")
            try:
                # The separator written before the entry belongs to the entry before it.
                last = conn.execute(
                    "SELECT rowid, start FROM entries ORDER BY start DESC LIMIT 1"
                ).fetchone()
                if last is not None:
                    grown = data[last[1] : start]
                    conn.execute(
                        "UPDATE entries SET size = ?, hash = ? WHERE rowid = ?",
                        (len(grown), hashlib.sha1(grown).hexdigest(), last[0]),
                    )
                self._insert(conn, entry, start, raw)
                first = conn.execute("SELECT min(start) FROM entries").fetchone()[0]
                self._set_meta(
                    conn,
                    size=new[0],
                    mtime_ns=new[1],
                    preamble=hashlib.sha1(data[: first or 0]).hexdigest(),
                )
                self._bump(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    # -- queries -----------------------------------------------------------------------------
    def plan(self, conn: sqlite3.Connection, query: str) -> QueryPlan:
        meta = self._meta(conn)
        known = vocabulary_cache(self.path, meta.get("size", ""), meta.get("mtime_ns", ""))

        def df(stem: str) -> int:
            count = known.get(stem)
            if count is None:
                row = conn.execute(
                    "SELECT doc FROM entries_vocab WHERE term = ?", (stem,)
                ).fetchone()
                count = known[stem] = int(row[0]) if row else 0
            return count

        def near(stem: str) -> list[str]:
            limit = 1 if len(stem) <= 5 else 2
            found = []
            for term, doc in conn.execute(
                "SELECT term, doc FROM entries_vocab WHERE term >= ? AND term < ?",
                (stem[0], chr(ord(stem[0]) + 1)),
            ):
                if abs(len(term) - len(stem)) <= limit and not term.isdigit():
                    distance = edit_distance(stem, term, limit)
                    if distance <= limit:
                        found.append((distance, -doc, term))
            return [term for _, _, term in sorted(found)[:2]]

        return analyse(query, load_synonyms(self.root), df, near)

    def lexical(
        self, conn: sqlite3.Connection, plan: QueryPlan, tags: list[str], depth: int
    ) -> list[Lexical]:
        """Entries matching every term, then entries matching some (more terms first), each
        group by BM25."""
        if plan.raw is None and not plan.all_of().strip():
            # Only stop words or punctuation ("the", "\u0000"): FTS5 has nothing to match.
            raise UserError(
                "the search query has no word to look for (only common words such as 'the', "
                "or punctuation); add a word that says what you are looking for."
            )
        if self.cached and plan.raw is None:
            from journal_agent.journal.search import postings

            with contextlib.suppress(sqlite3.OperationalError):  # then as below, which says why
                return postings.lexical(self.path, conn, plan, tags, depth)
        try:
            every = self.match(conn, plan.all_of(), tags, depth)
            some: dict[int, float] = {}
            # Partial matches rank after every full match: look for them only when there are
            # fewer full matches than the ranking needs (BM25 over thousands of rows is the
            # cost of a search).
            if plan.raw is None and len(plan.terms) > 1 and len(every) < depth:
                some = {
                    r: s
                    for r, s in self.match(conn, plan.any_of(), tags, depth).items()
                    if r not in every
                }
        except sqlite3.OperationalError as exc:
            if plan.raw is None and "fts5" not in str(exc):
                raise
            # Every error of a MATCH is about the query (syntax, unknown column, ...).
            raise UserError(
                f"search query {plan.raw or plan.all_of()!r} is not valid FTS5 syntax ({exc}); "
                'use plain words, put phrases in double quotes ("zero stage 2"), and balance '
                "quotes and parentheses."
            ) from None
        labels = [t.label for t in plan.terms]
        hits = [Lexical(rowid, score, list(labels)) for rowid, score in every.items()]
        partial = [Lexical(rowid, score) for rowid, score in some.items()]
        if partial:
            ids = ",".join(str(h.rowid) for h in partial)
            by_row = {h.rowid: h for h in partial}
            for term in plan.terms:
                for (rowid,) in conn.execute(
                    f"SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? AND rowid IN ({ids})",
                    (term.fts(),),
                ):
                    by_row[rowid].matched.append(term.label)
            partial.sort(key=lambda h: (-len(h.matched), h.bm25))
        hits.sort(key=lambda h: h.bm25)
        return hits + partial

    def match(
        self, conn: sqlite3.Connection, query: str, tags: list[str], depth: int
    ) -> dict[int, float]:
        sql = (
            "SELECT rowid, bm25(entries_fts, 10.0, 5.0, 1.0, 1.0) AS score FROM entries_fts "
            "WHERE entries_fts MATCH ?"
        )
        params: list[object] = [query]
        # "+rowid": a bare rowid constraint would be handed to FTS5, which then runs the whole
        # MATCH once per tagged entry (a tag on 225 of 10,000 entries: 250 ms instead of 4).
        for tag in tags:
            sql += " AND +rowid IN (SELECT entry FROM tags WHERE tag = ?)"
            params.append(tag)
        sql += " ORDER BY score LIMIT ?"
        params.append(depth)
        return {int(r[0]): float(r[1]) for r in conn.execute(sql, params)}

    def snippets(
        self, conn: sqlite3.Connection, plan: QueryPlan, rowids: list[int]
    ) -> dict[int, str]:
        """The matched words in context, per entry (one statement for all)."""
        if not rowids:
            return {}
        ids = ",".join(str(rowid) for rowid in rowids)
        return {
            rowid: one_line(text)
            for rowid, text in conn.execute(
                "SELECT rowid, snippet(entries_fts, -1, '[', ']', ' … ', ?) FROM entries_fts "
                f"WHERE entries_fts MATCH ? AND rowid IN ({ids})",
                (SNIPPET_WORDS, plan.any_of()),
            )
        }

    def make_hits(
        self,
        conn: sqlite3.Connection,
        ranked: list[tuple[int, float]],
        plan: QueryPlan,
        lexical: dict[int, Lexical],
        meaning: dict[int, float],
        snippets: dict[int, str] | None = None,
    ) -> list[Hit]:
        """The ranked entries as hits; ``snippets``: those already made (the rest are made
        here, an entry found by meaning alone showing its opening instead)."""
        snippets = dict(snippets or {})
        todo = [rowid for rowid, _ in ranked if rowid in lexical and rowid not in snippets]
        snippets.update(self.snippets(conn, plan, todo))
        out = []
        for rowid, score in ranked:
            row = conn.execute(
                "SELECT id, title, date, line FROM entries WHERE rowid = ?", (rowid,)
            ).fetchone()
            if row is None:
                continue
            snippet = snippets.get(rowid, "")
            if not snippet:
                snippet = self._opening(conn, rowid)
            out.append(
                Hit(
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    score,
                    snippet,
                    tuple(lexical[rowid].matched) if rowid in lexical else (),
                    meaning.get(rowid),
                )
            )
        return out

    def _opening(self, conn: sqlite3.Connection, rowid: int) -> str:
        """For an entry found by meaning alone: the start of its prose."""
        from journal_agent.journal.search.embeddings import embed_text

        row = conn.execute(
            "SELECT title, tags, body FROM entries_fts WHERE rowid = ?", (rowid,)
        ).fetchone()
        if row is None:
            return ""
        words = embed_text(*row).split()
        title_words = len(f"{row[0]}.".split()) + len(f"{row[1]}.".split())
        return " ".join(words[title_words : title_words + SNIPPET_WORDS * 2]) + " …"

    def by_tags(self, conn: sqlite3.Connection, tags: list[str], limit: int) -> list[Hit]:
        sql = "SELECT e.id, e.title, e.date, e.line FROM entries e WHERE 1"
        params: list[object] = []
        for tag in tags:
            sql += " AND e.rowid IN (SELECT entry FROM tags WHERE tag = ?)"
            params.append(tag)
        sql += " ORDER BY e.date DESC, e.line DESC LIMIT ?"
        params.append(limit)
        return [Hit(r[0], r[1], r[2], r[3], 0.0, "") for r in conn.execute(sql, params)]

    def entry_texts(self, conn: sqlite3.Connection, rowids: list[int]) -> dict[int, tuple]:
        """(title, tags, body) of indexed entries."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        return {
            r[0]: (r[1], r[2], r[3])
            for r in conn.execute(
                f"SELECT rowid, title, tags, body FROM entries_fts WHERE rowid IN ({marks})",
                rowids,
            )
        }

    def stats(self) -> dict[str, int]:
        conn = self.connect()
        try:
            self.ensure_fresh(conn)
            return {"entries": conn.execute("SELECT count(*) FROM entries").fetchone()[0]}
        finally:
            conn.close()


def _base(entry: Entry) -> str:
    """The id before numbering: the explicit one, or the one derived from title and date."""
    return entry.id if entry.explicit_id else entry.derived_id


def _cjk_chars(*texts: str) -> str:
    """The CJK text of an entry, one character per token ("节 省 显 存")."""
    return "\n".join(" ".join(run) for text in texts for run in CJK_RUN.findall(text))


__all__ = ["MIGRATIONS", "OPERATORS", "Hit", "SearchIndex", "open_migrated"]
