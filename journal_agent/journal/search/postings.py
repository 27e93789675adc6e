"""Words by BM25 from each phrase's rows, asked of the index once per state of the index.

FTS5's ``bm25()`` of a query is a sum over the query's phrases, in the order written, of each
phrase's part — its IDF times a function of its weighted frequency in the row and the row's
length —, and a phrase's part depends only on the phrase and the row, never on the rest of the
query. So the score of ``A AND (B OR C)`` in a row is ``-(0 + a + b + c)`` with ``a``, ``b``,
``c`` each phrase's part there (0 where it is absent), added in that order: the same
floating-point sum FTS5 makes, so the same scores to the last bit and the same order. Asking
each phrase once (``SELECT rowid, bm25(…) … MATCH '"phrase"'``) and keeping its rows and parts
makes a query's words an AND/OR of sorted arrays and a sum of their parts in numpy.

Why: search as you type sends the query again at every keystroke, and the words already typed
(with their synonyms) are most of it; on a 10,000-entry journal one common phrase matches
thousands of rows, and BM25 over them was the cost of every keystroke (15–40 ms each). Only the
phrases new in a keystroke are asked of the index now. The same parts rank every entry's
related entries at once for an export (``ranking.related_in``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from journal_agent.journal.search.hits import Lexical
    from journal_agent.journal.search.query import QueryPlan

# Column weights of bm25(): title ×10, tags ×5, body, cjk (the index's ranking everywhere).
BM25 = "bm25(entries_fts, 10.0, 5.0, 1.0, 1.0)"
BUDGET_BYTES = 8 << 20  # phrases kept per index: a common phrase of 10,000 entries is ~110 kB
UNIONS = 64  # terms' row sets kept (each at most 80 kB for 10,000 entries)


class _Phrases:
    """One index's phrases in one state of it: phrase → (rowids ascending, parts)."""

    def __init__(self, state: tuple[str, ...], budget: int) -> None:
        self.state = state
        self.budget = budget
        self.found: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.unions: dict[str, np.ndarray] = {}  # a term's alternatives → the rows holding any
        self.size = 0
        self.lock = threading.Lock()


_CACHE: dict[Path, _Phrases] = {}
_CACHE_LOCK = threading.Lock()
_BUDGETS: dict[Path, int] = {}


def keep_up_to(path: Path, budget: int) -> None:
    """Keep up to ``budget`` bytes of phrases for this index in this process (an export ranks
    every entry's related entries: their rare words come back a few entries later)."""
    _BUDGETS[path] = budget


def _phrases(path: Path, conn: sqlite3.Connection) -> _Phrases:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    state = (meta.get("size", ""), meta.get("mtime_ns", ""), meta.get("generation", ""))
    with _CACHE_LOCK:
        held = _CACHE.get(path)
        if held is None or held.state != state:
            held = _CACHE[path] = _Phrases(state, _BUDGETS.get(path, BUDGET_BYTES))
        return held


def part(
    path: Path, conn: sqlite3.Connection, phrase: str, phrases: _Phrases | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(rowids, parts)`` of one FTS5 phrase: the rows holding it, ascending, and its part of
    any query's BM25 score in each (positive: ``bm25()`` is minus the sum of parts).
    ``phrases``: the index's kept phrases, when the caller already checked their state."""
    import numpy as np

    phrases = phrases or _phrases(path, conn)
    with phrases.lock:
        if phrase in phrases.found:
            phrases.found.move_to_end(phrase)
            return phrases.found[phrase]
    rows = conn.execute(
        f"SELECT rowid, {BM25} FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rowid",
        (phrase,),
    ).fetchall()
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    # -(0.0 + p) is exactly -p: negating gives back the part FTS5 added.
    parts = -np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
    with phrases.lock:
        if phrase not in phrases.found:
            phrases.found[phrase] = (rowids, parts)
            phrases.size += rowids.nbytes + parts.nbytes
            while phrases.size > phrases.budget and len(phrases.found) > 1:
                _, (r, p) = phrases.found.popitem(last=False)
                phrases.size -= r.nbytes + p.nbytes
    return rowids, parts


def match(
    path: Path,
    conn: sqlite3.Connection,
    plan: QueryPlan,
    every: bool,
    allowed: np.ndarray | None,
    depth: int,
) -> dict[int, float]:
    """``{rowid: bm25}`` of the best ``depth`` rows matching every term of ``plan`` (``every``)
    or any, best first, ties by rowid — what ``ORDER BY bm25(…) LIMIT depth`` over the plan's
    ``all_of()`` / ``any_of()`` gives. ``allowed``: the rowids a tag filter leaves, or None."""
    import numpy as np

    # The phrases in the order the query text writes them (each term's alternatives, deduped
    # as Term.fts() writes them): the order FTS5 adds their parts in.
    terms = [list(dict.fromkeys(t.alternatives)) for t in plan.terms]
    kept = _phrases(path, conn)
    looked = {p: part(path, conn, p, kept) for alternatives in terms for p in alternatives}
    rows_of_term = [rows_matching(path, conn, alternatives, kept) for alternatives in terms]
    if not rows_of_term:
        return {}
    if not every:
        total, rows = _any(terms, looked, rows_of_term, allowed)
        if rows.size == 0:
            return {}
    else:
        rows = rows_of_term[0]
        for more in rows_of_term[1:]:
            rows = np.intersect1d(rows, more, assume_unique=True)
        if allowed is not None:
            rows = rows[np.isin(rows, allowed, assume_unique=True)]
        if rows.size == 0:
            return {}
        total = np.zeros(rows.size, dtype=np.float64)
        for alternatives in terms:
            for p in alternatives:
                rowids, parts = looked[p]
                at = np.searchsorted(rows, rowids)
                inside = at < rows.size
                inside[inside] = rows[at[inside]] == rowids[inside]
                total[at[inside]] += parts[inside]
    scores = -total
    order = np.lexsort((rows, scores))[:depth]
    return {int(rows[i]): float(scores[i]) for i in order}


def _any(
    terms: list[list[str]],
    looked: dict[str, tuple[np.ndarray, np.ndarray]],
    rows_of_term: list[np.ndarray],
    allowed: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows holding any term, ascending, and their sums of parts: over arrays as long as the
    table (an export ranks 10,000 entries' related ones this way: no merging of row lists)."""
    import numpy as np

    size = 1 + max((int(r[-1]) for r in rows_of_term if r.size), default=-1)
    hit = np.zeros(max(size, 0), dtype=bool)
    for r in rows_of_term:
        hit[r] = True
    if allowed is not None:
        keep = np.zeros(hit.size, dtype=bool)
        keep[allowed[allowed < hit.size]] = True
        hit &= keep
    dense = np.zeros(hit.size, dtype=np.float64)
    for alternatives in terms:
        for p in alternatives:  # in the query's order: FTS5's own order of addition
            rowids, parts = looked[p]
            dense[rowids] += parts
    rows = np.flatnonzero(hit)
    return dense[rows], rows


def rows_matching(
    path: Path, conn: sqlite3.Connection, alternatives: list[str], phrases: _Phrases | None = None
) -> np.ndarray:
    """The rowids holding any of these phrases (one term of a plan), ascending; kept too, as
    a term typed stays in the query for the keystrokes after it."""
    unique = list(dict.fromkeys(alternatives))
    phrases = phrases or _phrases(path, conn)
    if len(unique) == 1:
        return part(path, conn, unique[0], phrases)[0]
    key = "\0".join(unique)
    with phrases.lock:
        if key in phrases.unions:
            return phrases.unions[key]
    rows = _union([part(path, conn, p, phrases)[0] for p in unique])
    with phrases.lock:
        if len(phrases.unions) >= UNIONS:
            phrases.unions.clear()
        phrases.unions[key] = rows
    return rows


def _union(arrays: list[np.ndarray]) -> np.ndarray:
    import numpy as np

    if not arrays:
        return np.zeros(0, dtype=np.int64)
    if len(arrays) == 1:
        return arrays[0]
    return np.unique(np.concatenate(arrays))


def lexical(
    path: Path, conn: sqlite3.Connection, plan: QueryPlan, tags: list[str], depth: int
) -> list[Lexical]:
    """``SearchIndex.lexical`` from the phrases' parts: entries matching every term, then
    entries matching some (more terms first), each group by BM25 — the same list."""
    import numpy as np

    from journal_agent.journal.search.hits import Lexical

    allowed = None
    for tag in tags:
        tagged = np.fromiter(
            (r[0] for r in conn.execute("SELECT entry FROM tags WHERE tag = ?", (tag,))),
            dtype=np.int64,
        )
        allowed = tagged if allowed is None else np.intersect1d(allowed, tagged)
    if allowed is not None:
        allowed = np.unique(allowed)
    every = match(path, conn, plan, True, allowed, depth)
    some: dict[int, float] = {}
    if len(plan.terms) > 1 and len(every) < depth:
        found = match(path, conn, plan, False, allowed, depth)
        some = {r: s for r, s in found.items() if r not in every}
    labels = [t.label for t in plan.terms]
    hits = [Lexical(rowid, score, list(labels)) for rowid, score in every.items()]
    partial = [Lexical(rowid, score) for rowid, score in some.items()]
    if partial:
        ids = np.fromiter(some, dtype=np.int64, count=len(some))
        by_row = {h.rowid: h for h in partial}
        for term in plan.terms:
            holding = ids[np.isin(ids, rows_matching(path, conn, term.alternatives))]
            for rowid in holding.tolist():
                by_row[rowid].matched.append(term.label)
        partial.sort(key=lambda h: (-len(h.matched), h.bm25))
    hits.sort(key=lambda h: h.bm25)
    return hits + partial
