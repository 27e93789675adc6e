"""Words ranked from each phrase's kept parts (postings.py, what the view and the export use)
give exactly what SQLite's bm25() over the whole query gives: the same entries, scores to the
last bit, order, matched words — for every query of the relevance set and each prefix of it
as typed, with and without a tag, and for every entry's related entries."""

from __future__ import annotations

from journal_agent.journal import api
from journal_agent.journal.search import ranking
from journal_agent.journal.search.index import SearchIndex

from ..conftest import make_entry
from .relevance import QUERIES


def _words(hits) -> list[tuple]:
    return [(h.rowid, h.bm25, tuple(h.matched)) for h in hits]


def test_cached_phrases_rank_words_exactly_as_sqlite(relevance_journal):
    root = relevance_journal.root
    sql, cached = SearchIndex(root), SearchIndex(root, cached=True)
    conn = sql.connect()
    try:
        sql.ensure_fresh(conn)
        typed = {q[:n] for q, _ in QUERIES for n in range(2, len(q) + 1, 3)}
        typed |= {q for q, _ in QUERIES}
        compared = 0
        for query in sorted(typed):
            plan = sql.plan(conn, query)
            if plan.raw is not None or not plan.all_of().strip():
                continue
            for tags in ([], ["zero"], ["memory", "deepspeed"]):
                expected = _words(sql.lexical(conn, plan, tags, 30))
                assert _words(cached.lexical(conn, plan, tags, 30)) == expected, (query, tags)
                compared += bool(expected)
        assert compared > 200  # most of them find something: the comparison is not empty

        # The kept phrases follow the index: after an append (every part changes: the IDF,
        # the mean length) the same query gives SQLite's answer again, the new entry in it.
        plan = sql.plan(conn, "optimizer states sharded")
        before = cached.lexical(conn, plan, [], 30)
        entry = make_entry(
            title="Optimizer States Sharded Everywhere",
            body="Optimizer states sharded across ranks, optimizer states sharded again.\n",
            tags="#zero",
        )
        assert api.append_entry(relevance_journal.workspace, entry, force=True).appended
        sql.ensure_fresh(conn)
        plan = sql.plan(conn, "optimizer states sharded")
        after = cached.lexical(conn, plan, [], 30)
        assert _words(after) == _words(sql.lexical(conn, plan, [], 30)) != _words(before)
        newest = conn.execute("SELECT max(rowid) FROM entries").fetchone()[0]
        assert newest in [h.rowid for h in after] and newest not in [h.rowid for h in before]
    finally:
        conn.close()


def test_related_from_cached_phrases_is_the_same(relevance_journal):
    root = relevance_journal.root
    sql, cached = SearchIndex(root), SearchIndex(root, cached=True)
    conn = sql.connect()
    try:
        sql.ensure_fresh(conn)
        data = (root / "learning_journal.md").read_bytes()
        rows = conn.execute("SELECT id, start, size FROM entries ORDER BY start").fetchall()
        for entry_id, start, size in rows:
            draft = data[start : start + size].decode("utf-8")
            for semantic in (False, True):
                want = ranking.related_in(sql, conn, draft, 5, {entry_id}, semantic)
                got = ranking.related_in(cached, conn, draft, 5, {entry_id}, semantic)
                assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in want]
    finally:
        conn.close()
