"""The search index's schema: append-only named migrations, and the one way to open a
migrated SQLite cache (the index and the vectors store both use it).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

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
    (
        # Stemming ("partition" finds "partitions"); each entry's byte range (so an edit is
        # re-indexed by parsing the edited stretch only), the id it was derived from (to tell
        # when an edit could renumber other entries' ids), and the key of its embedding text.
        "005_porter_ranges",
        """
        DROP TABLE entries_vocab;
        DROP TABLE entries_fts;
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, tags, body, cjk, tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE entries_vocab USING fts5vocab(entries_fts, 'row');
        ALTER TABLE entries ADD COLUMN start INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE entries ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE entries ADD COLUMN base TEXT NOT NULL DEFAULT '';
        ALTER TABLE entries ADD COLUMN embed_key TEXT NOT NULL DEFAULT '';
        CREATE INDEX entries_by_start ON entries (start);
        DELETE FROM entries;
        DELETE FROM tags;
        DELETE FROM meta;
        """,
    ),
    (
        # Each entry's stemmed words (what the near-duplicate rule weighs), kept by the entry's
        # hash: `journal check` stems only the entries that changed since it last ran.
        "006_entry_bags",
        "CREATE TABLE bags (id TEXT PRIMARY KEY, hash TEXT NOT NULL, bag TEXT NOT NULL);",
    ),
]


def open_migrated(path: Path, migrations: list[tuple[str, str]]) -> sqlite3.Connection:
    """A connection with every migration applied once; a corrupt cache file — or one missing
    a table its migrations made (dropped by hand, a half-copied file) — is started over: it
    is rebuilt from the markdown.

    SQLite opens by name and follows a link at the database itself (its side files it opens
    with ``O_NOFOLLOW``), and blocks on a FIFO: the file and the folders on the way are checked
    through :func:`journal_agent.confined.sqlite_file` first, from the workspace above
    ``.journal/``, and a link, FIFO or hard link there is ``confined.Refused``."""
    from journal_agent import confined
    from journal_agent.paths import anchor_of

    anchor = anchor_of(path)
    checked = confined.sqlite_file(anchor, path, create=True)
    assert checked is not None  # (create=True gives the path even for a new database)
    try:
        conn = _open(checked, migrations)
        missing = _tables(migrations) - {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not missing:
            return conn
        conn.close()
    except sqlite3.DatabaseError:
        pass
    for suffix in ("", "-wal", "-shm"):
        confined.unlink(anchor, f"{path}{suffix}")
    return _open(checked, migrations)


_CREATE = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
_DROP = re.compile(r"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)", re.I)


def _tables(migrations: list[tuple[str, str]]) -> set[str]:
    """The tables the migrations leave, in order: made, and not dropped after."""
    tables: set[str] = set()
    for _, sql in migrations:
        for statement in sql.split(";"):
            if made := _CREATE.search(statement):
                tables.add(made.group(1))
            elif dropped := _DROP.search(statement):
                tables.discard(dropped.group(1))
    return tables


def _open(path: str, migrations: list[tuple[str, str]]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied TEXT)")
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    for name, sql in migrations:
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
