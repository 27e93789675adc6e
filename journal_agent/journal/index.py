"""Full-text search over the journal: SQLite FTS5 under ``.journal/index.sqlite``.

The index is a cache of the markdown: it records the journal's size, mtime and hash, and
rebuilds itself when they no longer match. Schema changes are append-only named migrations.
Appends update it in place (one row) when it was current before the append.
"""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from journal_agent.errors import UserError
from journal_agent.journal.model import Entry, parse_journal
from journal_agent.journal.store import JournalStore, decode_journal

# Append-only: never edit a migration that has shipped; add a new one.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_entries",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE entries (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            date TEXT NOT NULL,
            line INTEGER NOT NULL
        );
        CREATE TABLE tags (entry INTEGER NOT NULL, tag TEXT NOT NULL);
        CREATE INDEX tags_by_tag ON tags (tag);
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, tags, body, tokenize = 'unicode61 remove_diacritics 2'
        );
        """,
    ),
    (
        "002_vocab",
        "CREATE VIRTUAL TABLE entries_vocab USING fts5vocab(entries_fts, 'row');",
    ),
    (
        # Per-entry content hash: a rebuild after a hand edit re-indexes only changed entries.
        "003_entry_hash",
        "ALTER TABLE entries ADD COLUMN hash TEXT NOT NULL DEFAULT '';",
    ),
    (
        # unicode61 keeps a run of CJK characters as one token, so 显存 would not find 节省显存:
        # a fourth column holds CJK text one character per token, searched as phrases.
        # FTS5 tables cannot gain columns, so the table is recreated and refilled.
        "004_cjk_column",
        """
        DROP TABLE entries_vocab;
        DROP TABLE entries_fts;
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, tags, body, cjk, tokenize = 'unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE entries_vocab USING fts5vocab(entries_fts, 'row');
        DELETE FROM entries;
        DELETE FROM tags;
        DELETE FROM meta;
        """,
    ),
]

_OPERATORS = re.compile(r'["()*:^+]|\b(?:AND|OR|NOT|NEAR)\b')
_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "not",
        "but",
        "you",
        "your",
        "can",
        "will",
        "into",
        "its",
        "than",
        "then",
        "them",
        "they",
        "their",
        "there",
        "what",
        "when",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "each",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "very",
        "just",
        "also",
        "use",
        "used",
        "using",
        "one",
        "two",
        "per",
        "via",
        "like",
        "about",
        "after",
        "before",
        "over",
        "under",
        "between",
        "does",
        "did",
        "doing",
        "been",
        "being",
        "would",
        "could",
        "should",
        "example",
        "examples",
        "section",
        "sections",
        "key",
        "question",
        "context",
        "intuition",
        "insights",
        "mathematical",
        "explanation",
        "code",
        "analogy",
        "toy",
        "diagrams",
        "communication",
        "flow",
        "what",
        "works",
        "well",
        "limitations",
        "pitfalls",
        "comparisons",
        "performance",
        "trade",
        "offs",
        "extension",
        "ideas",
        "practical",
        "tips",
        "related",
        "concepts",
        "follow",
        "questions",
        "tags",
        "entry",
        "header",
    ]
)


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    date: str
    line: int
    score: float
    snippet: str

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "date": self.date,
            "line": self.line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
        }


class SearchIndex:
    def __init__(self, root: Path) -> None:
        self.store = JournalStore(root)
        self.path = self.store.state / "index.sqlite"

    # -- connection and schema -------------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        self.store.state.mkdir(parents=True, exist_ok=True)
        try:
            conn = self._open()
        except sqlite3.DatabaseError:
            # A cache we can always rebuild from the markdown: start over.
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            conn = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied TEXT)")
        done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                    conn.execute("ROLLBACK")
                    continue
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO _migrations VALUES (?, datetime('now'))", (name,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return conn

    # -- freshness ---------------------------------------------------------------------------
    def _meta(self, conn: sqlite3.Connection) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    def ensure_fresh(self, conn: sqlite3.Connection) -> None:
        """Rebuild when the markdown changed since the index was built."""
        try:
            st = self.store.path.stat()
        except FileNotFoundError:
            if self._meta(conn).get("size") != "-1":
                self._rebuild(conn, b"", -1, -1)
            return
        meta = self._meta(conn)
        if meta.get("size") == str(st.st_size) and meta.get("mtime_ns") == str(st.st_mtime_ns):
            return
        data = self.store.path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if meta.get("sha256") == digest:
            self._set_meta(conn, st.st_size, st.st_mtime_ns, digest)
            return
        self._rebuild(conn, data, st.st_size, st.st_mtime_ns)

    def _set_meta(self, conn: sqlite3.Connection, size: int, mtime_ns: int, digest: str) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)",
            [("size", str(size)), ("mtime_ns", str(mtime_ns)), ("sha256", digest)],
        )

    def _rebuild(self, conn: sqlite3.Connection, data: bytes, size: int, mtime_ns: int) -> None:
        """Bring the index in line with the journal, re-indexing only entries that changed."""
        text = decode_journal(data, self.store.path) if data else ""
        journal = parse_journal(text)
        conn.execute("BEGIN IMMEDIATE")
        try:
            meta = self._meta(conn)
            if (meta.get("size"), meta.get("mtime_ns")) == (str(size), str(mtime_ns)):
                conn.execute("ROLLBACK")  # another process brought it up to date meanwhile
                return
            known = {
                row[0]: (row[1], row[2], row[3])
                for row in conn.execute("SELECT id, rowid, hash, line FROM entries")
            }
            seen: set[str] = set()
            for entry in journal.entries:
                seen.add(entry.id)
                old = known.get(entry.id)
                if old is not None and old[1] == _entry_hash(entry):
                    if old[2] != entry.start_line:
                        conn.execute(
                            "UPDATE entries SET line = ? WHERE rowid = ?",
                            (entry.start_line, old[0]),
                        )
                    continue
                if old is not None:
                    self._delete(conn, old[0])
                self._insert(conn, entry)
            for entry_id, (rowid, _, _) in known.items():
                if entry_id not in seen:
                    self._delete(conn, rowid)
            self._set_meta(conn, size, mtime_ns, hashlib.sha256(data).hexdigest())
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _delete(self, conn: sqlite3.Connection, rowid: int) -> None:
        conn.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM tags WHERE entry = ?", (rowid,))
        conn.execute("DELETE FROM entries_fts WHERE rowid = ?", (rowid,))

    def _insert(self, conn: sqlite3.Connection, entry: Entry) -> None:
        old = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry.id,)).fetchone()
        if old is not None:
            self._delete(conn, old[0])
        cur = conn.execute(
            "INSERT INTO entries (id, title, date, line, hash) VALUES (?, ?, ?, ?, ?)",
            (entry.id, entry.title, entry.date, entry.start_line, _entry_hash(entry)),
        )
        rowid = cur.lastrowid
        tags = entry.tags
        conn.executemany("INSERT INTO tags VALUES (?, ?)", [(rowid, t) for t in tags])
        conn.execute(
            "INSERT INTO entries_fts (rowid, title, tags, body, cjk) VALUES (?, ?, ?, ?, ?)",
            (rowid, entry.title, " ".join(tags), entry.body, _cjk_chars(entry.title, entry.body)),
        )

    def note_append(
        self, entry: Entry, old: tuple[int, int], new: tuple[int, int], data: bytes
    ) -> None:
        """After an append: add the one entry if the index was current before it."""
        conn = self.connect()
        try:
            meta = self._meta(conn)
            if (meta.get("size"), meta.get("mtime_ns")) != (str(old[0]), str(old[1])):
                return  # stale anyway: the next search rebuilds
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._insert(conn, entry)
                self._set_meta(conn, new[0], new[1], hashlib.sha256(data).hexdigest())
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    # -- queries -----------------------------------------------------------------------------
    def search(self, query: str, tags: list[str] | None = None, limit: int = 10) -> list[Hit]:
        tags = [t.lstrip("#").lower() for t in (tags or []) if t.strip("#")]
        conn = self.connect()
        try:
            self.ensure_fresh(conn)
            if not query.strip():
                return self._by_tags(conn, tags, limit)
            try:
                return self._match(conn, query, tags, limit)
            except sqlite3.OperationalError as exc:
                # Every error of a MATCH is about the query (syntax, unknown column, ...).
                if _OPERATORS.search(query):
                    raise UserError(
                        f"search query {query!r} is not valid FTS5 syntax ({exc}); use plain "
                        'words, put phrases in double quotes ("zero stage 2"), and balance '
                        "quotes and parentheses."
                    ) from None
                # Plain words with punctuation (ZeRO-2, fp16.): search them as phrases.
                return self._match(conn, _quote_terms(query), tags, limit)
        finally:
            conn.close()

    def _match(
        self, conn: sqlite3.Connection, query: str, tags: list[str], limit: int
    ) -> list[Hit]:
        sql = (
            "SELECT e.id, e.title, e.date, e.line, "
            "bm25(entries_fts, 10.0, 5.0, 1.0, 1.0) AS score, "
            "snippet(entries_fts, 2, '[', ']', ' … ', 12) "
            "FROM entries_fts JOIN entries e ON e.rowid = entries_fts.rowid "
            "WHERE entries_fts MATCH ?"
        )
        params: list[object] = [_cjk_query(query)]
        for tag in tags:
            sql += " AND e.rowid IN (SELECT entry FROM tags WHERE tag = ?)"
            params.append(tag)
        sql += " ORDER BY score LIMIT ?"
        params.append(limit)
        return [
            Hit(r[0], r[1], r[2], r[3], -r[4], _one_line(r[5])) for r in conn.execute(sql, params)
        ]

    def _by_tags(self, conn: sqlite3.Connection, tags: list[str], limit: int) -> list[Hit]:
        sql = "SELECT e.id, e.title, e.date, e.line FROM entries e WHERE 1"
        params: list[object] = []
        for tag in tags:
            sql += " AND e.rowid IN (SELECT entry FROM tags WHERE tag = ?)"
            params.append(tag)
        sql += " ORDER BY e.date DESC, e.line DESC LIMIT ?"
        params.append(limit)
        return [Hit(r[0], r[1], r[2], r[3], 0.0, "") for r in conn.execute(sql, params)]

    def related(self, draft: str, limit: int = 5, exclude: set[str] | None = None) -> list[Hit]:
        """Entries most similar to a draft: BM25 over the draft's most telling terms."""
        conn = self.connect()
        try:
            self.ensure_fresh(conn)
            terms = self._salient_terms(conn, draft)
            if not terms:
                return []
            query = " OR ".join(f'"{t}"' for t in terms)
            hits = self._match(conn, query, [], limit + len(exclude or ()))
        finally:
            conn.close()
        return [h for h in hits if h.id not in (exclude or set())][:limit]

    def _salient_terms(self, conn: sqlite3.Connection, draft: str, count: int = 16) -> list[str]:
        words = [w for w in re.findall(r"[^\W_]+", draft.lower()) if _useful(w)]
        if not words:
            return []
        tf = Counter(words)
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0] or 1
        df = {}
        for word in tf:
            row = conn.execute("SELECT doc FROM entries_vocab WHERE term = ?", (word,)).fetchone()
            df[word] = row[0] if row else 0
        # Terms no entry contains cannot match; very common ones do not discriminate.
        scored = [
            (tf[w] * math.log(1 + total / df[w]), w) for w in tf if 0 < df[w] <= max(1, total * 0.6)
        ]
        scored.sort(reverse=True)
        return [w for _, w in scored[:count]]

    def stats(self) -> dict[str, int]:
        conn = self.connect()
        try:
            self.ensure_fresh(conn)
            return {"entries": conn.execute("SELECT count(*) FROM entries").fetchone()[0]}
        finally:
            conn.close()


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def _cjk_chars(*texts: str) -> str:
    """The CJK text of an entry, one character per token ("节 省 显 存")."""
    return "\n".join(" ".join(run) for text in texts for run in _CJK_RUN.findall(text))


def _cjk_query(query: str) -> str:
    """CJK runs of a query become phrases of single characters, matching anywhere in a run."""
    if not _CJK_RUN.search(query):
        return query
    out, quoted = [], False
    for part in re.split(r'(")', query):
        if part == '"':
            quoted = not quoted
            out.append(part)
        elif quoted:
            out.append(_CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", part))
        else:
            out.append(_CJK_RUN.sub(lambda m: ' "' + " ".join(m.group(0)) + '" ', part))
    return "".join(out)


def _entry_hash(entry: Entry) -> str:
    return hashlib.sha1(entry.raw.encode("utf-8", "surrogatepass")).hexdigest()


def _useful(word: str) -> bool:
    return len(word) >= 3 and not word.isdigit() and word not in _STOPWORDS


def _quote_terms(query: str) -> str:
    return " ".join('"' + t.replace('"', '""') + '"' for t in query.split())


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()
