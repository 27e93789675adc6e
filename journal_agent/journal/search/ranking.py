"""Ranking: a query's entries (``search``) and the entries a draft should link to
(``related``) — words by BM25 from the index, fused by reciprocal rank with meaning when the
embeddings extra is there (``fusion``). Kept out of ``index.py`` so the index, which fusion
reads, never imports fusion: no import circle.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter
from typing import TYPE_CHECKING

from journal_agent.journal.search import fusion, postings
from journal_agent.journal.search.hits import Hit, Lexical, useful
from journal_agent.journal.search.index import SearchIndex
from journal_agent.journal.search.query import (
    CJK_RUN,
    QueryPlan,
    Term,
    is_fts_syntax,
    phrase,
    stems,
)

if TYPE_CHECKING:
    import numpy as np


def search(
    index: SearchIndex,
    query: str,
    tags: list[str] | None = None,
    limit: int = 10,
    semantic: bool = True,
) -> list[Hit]:
    """Entries for a query: by words (all, then some) and, when available, by meaning."""
    tags = [t.lstrip("#").lower() for t in (tags or []) if t.strip("#")]
    meaning = semantic and bool(query.strip()) and not is_fts_syntax(query)
    depth = max(limit * 3, 30)
    # Meaning is worked out on the other core while this thread searches by words (numpy
    # and SQLite both release the GIL); started first, as embedding is the longer part.
    fresh = threading.Event()
    by_meaning = fusion.nearest_soon(index, query, tags, depth, fresh) if meaning else None
    conn = index.connect()
    try:
        try:
            index.ensure_fresh(conn)
        finally:
            fresh.set()
        if not query.strip():
            return index.by_tags(conn, tags, limit)
        plan = index.plan(conn, query)
        lexical = index.lexical(conn, plan, tags, depth)
        snippets: dict[int, str] = {}
        nearest: list[tuple[int, float]] = []
        if by_meaning is not None:
            if not by_meaning.done():
                # While meaning is still coming: the snippets of the best word matches,
                # which are most of what fusion shows.
                snippets = index.snippets(conn, plan, [h.rowid for h in lexical[:limit]])
            nearest, index.semantic_note = by_meaning.result()
        elif meaning:
            nearest, index.semantic_note = fusion.nearest(index, conn, query, tags, depth)
        ranked = fusion.fuse(lexical, nearest, limit)
        by_row = {r.rowid: r for r in lexical}
        return index.make_hits(conn, ranked, plan, by_row, dict(nearest), snippets)
    finally:
        conn.close()


def related(
    index: SearchIndex,
    draft: str,
    limit: int = 5,
    exclude: set[str] | None = None,
    semantic: bool = True,
) -> list[Hit]:
    """Entries a draft should link to: its most telling terms by BM25, fused with meaning."""
    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        return related_in(index, conn, draft, limit, exclude or set(), semantic)
    finally:
        conn.close()


def related_in(
    index: SearchIndex,
    conn: sqlite3.Connection,
    draft: str,
    limit: int,
    exclude: set[str],
    semantic: bool = True,
    vector: np.ndarray | None = None,
) -> list[Hit]:
    plan, lexical, nearest = related_parts(index, conn, draft, limit, exclude, semantic, vector)
    ranked = fusion.fuse(lexical, nearest, limit, floor=fusion.RELATED_FLOOR)
    return index.make_hits(conn, ranked, plan, {h.rowid: h for h in lexical}, dict(nearest))


def related_parts(
    index: SearchIndex,
    conn: sqlite3.Connection,
    draft: str,
    limit: int,
    exclude: set[str],
    semantic: bool = True,
    vector: np.ndarray | None = None,
    nearest: list[tuple[int, float]] | None = None,
    df: dict[str, int] | None = None,
) -> tuple[QueryPlan, list[Lexical], list[tuple[int, float]]]:
    """What ``related_in`` fuses: the draft's telling terms, the entries matching them by
    BM25, and the entries nearest in meaning (``nearest`` when the caller ranked them
    already: the export, for every entry at once), without the ``exclude``d ones."""
    terms, common = salient_terms(conn, draft, df=df)
    plan = QueryPlan([Term(t, [phrase(t)]) for t in terms])
    depth = limit + len(exclude) + 20
    lexical: list[Lexical] = []
    if terms:
        found = {}
        # Words most entries hold: the entries holding them all (ranked by how much, titles
        # first), or, when none holds all, any (a few rows, not half the journal's).
        for every in (True, False) if common else (False,):
            if index.cached:
                found = postings.match(index.path, conn, plan, every, None, depth)
            else:
                found = index.match(conn, plan.all_of() if every else plan.any_of(), [], depth)
            if found:
                break
        lexical = [Lexical(r, s) for r, s in sorted(found.items(), key=lambda x: x[1])]
    if nearest is None:
        nearest = []
        if semantic:
            nearest, index.semantic_note = fusion.nearest(
                index, conn, draft, [], depth, as_entry=True, vector=vector
            )
    excluded = {
        r[0]
        for r in conn.execute(
            f"SELECT rowid FROM entries WHERE id IN ({','.join('?' * len(exclude))})",
            list(exclude),
        )
    }
    lexical = [h for h in lexical if h.rowid not in excluded]
    nearest = [(r, s) for r, s in nearest if r not in excluded]
    return plan, lexical, nearest


def salient_terms(
    conn: sqlite3.Connection, draft: str, count: int = 16, df: dict[str, int] | None = None
) -> tuple[list[str], bool]:
    """A draft's most telling stems: frequent in it, rare in the journal, and whether they are
    common ones (no stem of the draft is rare: see below). ``df``: a dict the caller keeps of
    the stems' document counts (the export asks for every entry's), with the number of entries
    as its ``total`` when it knows it."""
    # Counted first, then each distinct stem judged once (the same order of first use).
    tf = Counter(stems(CJK_RUN.sub(" ", draft)))
    tf = Counter({w: n for w, n in tf.items() if useful(w)})
    if not tf:
        return [], False
    total = getattr(df, "total", 0) or conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    total = total or 1
    df = {} if df is None else df
    for word in tf:
        if word not in df:
            row = conn.execute("SELECT doc FROM entries_vocab WHERE term = ?", (word,)).fetchone()
            df[word] = row[0] if row else 0
    # Terms no entry contains cannot match; very common ones do not discriminate — unless
    # the draft has nothing else (a journal on one subject: its every word is in most
    # entries; a draft in those words found nothing at all on a 70,000-entry journal).
    ceiling = max(1, total * 0.6)
    scored = [(tf[w] * math.log(1 + total / df[w]), w) for w in tf if 0 < df[w] <= ceiling]
    common = not scored
    if common:
        scored = [(tf[w] * math.log(1 + total / df[w]), w) for w in tf if df[w] > 0]
    scored.sort(reverse=True)
    return [w for _, w in scored[:count]], common and bool(scored)
