"""Related entries of one entry or of every entry at once: ``ranking.related``'s ranking (the
entry's telling terms by BM25, fused with the entries nearest in meaning), with what ranking
each entry on its own would ask again and again done once.

- each entry's vector is the one the vector cache holds for its text (what appending it
  embedded), not the entry embedded again (≈ 0.1 s each on a CPU);
- for every entry at once (an export), the similarities come from one matrix product per block
  of entries, and the stems' document counts are read once: 10,000 entries take seconds of
  CPU, not the 15 minutes one by one took.

The view's entry page and its export use these, so they list the same related entries.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent.journal.search import fusion, postings, ranking
from journal_agent.journal.search.embeddings import Unavailable, get_embedder
from journal_agent.journal.search.index import SearchIndex

if TYPE_CHECKING:
    import numpy as np

    from journal_agent.journal.search.embeddings import Embedder
    from journal_agent.journal.search.hits import Hit

BLOCK = 512  # entries whose similarities to all are computed at once (512 × 10,000 floats)
KEPT_BYTES = 256 << 20  # phrases kept while ranking all (most are rare words: a few rows each)


@dataclass(frozen=True)
class Related:
    id: str
    title: str
    date: str


def _meaning(
    index: SearchIndex, conn: sqlite3.Connection
) -> tuple[Embedder, fusion._Matrix] | tuple[None, None]:
    """The embedder and the entries' vectors (``fusion``'s cached matrix), or (None, None)
    when meaning is not available (no extra, turned off, no vectors yet)."""
    try:
        embedder = get_embedder(index.root)
    except Unavailable:
        return None, None
    matrix = fusion._load(index, conn, embedder, fill=0)
    return (embedder, matrix) if matrix.rowids else (None, None)


def _uses_meaning(embedder: Embedder | None, draft: str) -> bool:
    # As fusion.nearest decides for a draft: an English-only model gets no Chinese entries.
    return embedder is not None and not (embedder.english_only and fusion._mostly_cjk(draft))


def related(root: Path, entry_id: str, draft: str, limit: int = 5) -> list[Hit]:
    """One entry's related entries (hits), its vector taken from the cache when it is there."""
    index = SearchIndex(Path(root), cached=True)
    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        embedder, matrix = _meaning(index, conn)
        vector = None
        if matrix is not None and _uses_meaning(embedder, draft):
            row = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
            at = _positions(matrix).get(row[0]) if row else None
            vector = None if at is None else matrix.vectors[at]
        semantic = _uses_meaning(embedder, draft) or embedder is None
        return ranking.related_in(index, conn, draft, limit, {entry_id}, semantic, vector)
    finally:
        conn.close()


_POSITIONS: dict[int, tuple[fusion._Matrix, dict[int, int]]] = {}


def _positions(matrix: fusion._Matrix) -> dict[int, int]:
    held = _POSITIONS.get(id(matrix))
    if held is None or held[0] is not matrix:
        _POSITIONS.clear()
        held = _POSITIONS[id(matrix)] = (matrix, {r: i for i, r in enumerate(matrix.rowids)})
    return held[1]


class _Counts(dict):
    """Every indexed stem's document count, read at once; a stem not in it is in no entry."""

    total = 0  # the number of entries

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> int:
        return 0


class RelatedAll:
    """Every entry's related entries: build once (in the parent process), then ask ``of`` for
    each entry (in worker processes too: each opens its own connection to the index)."""

    def __init__(self, root: Path, limit: int = 5) -> None:
        self.root = Path(root)
        self.limit = limit
        self.index = SearchIndex(self.root, cached=True)
        postings.keep_up_to(self.index.path, KEPT_BYTES)
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        conn = self.connection()
        self.df = _Counts(conn.execute("SELECT term, doc FROM entries_vocab"))
        self.df.total = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        found = conn.execute("SELECT rowid, id, title, date FROM entries").fetchall()
        self.rows = {r[0]: Related(r[1], r[2], r[3]) for r in found}
        self.rowid = {r[1]: r[0] for r in found}
        self.embedder, matrix = _meaning(self.index, conn)
        # Each entry's nearest by meaning: row n of ``near`` / ``sims`` for the entry at ``at``.
        self.at: dict[int, int] = {}
        self.near: np.ndarray | None = None
        self.sims: np.ndarray | None = None
        if matrix is not None:
            self._rank_all(matrix, limit + 1 + 20)  # the depth related_in asks for
        conn.close()  # workers forked from here open their own
        self._conn = None

    def connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # never a parent's after a fork
            self._conn = self.index.connect()
            self._pid = os.getpid()
            self.index.ensure_fresh(self._conn)
        return self._conn

    def _rank_all(self, matrix: fusion._Matrix, depth: int) -> None:
        import numpy as np

        vectors, rowids = matrix.vectors, np.asarray(matrix.rowids, dtype=np.int64)
        top = min(depth, len(rowids))
        self.at = {int(r): n for n, r in enumerate(rowids)}
        self.near = np.zeros((len(rowids), top), dtype=np.int64)
        self.sims = np.zeros((len(rowids), top), dtype=np.float32)
        from journal_agent.journal.search._bert import one_blas_thread

        for start in range(0, len(rowids), BLOCK):
            with one_blas_thread():  # a shared machine's cores: threads would only contend
                sims = vectors[start : start + BLOCK] @ vectors.T
            best = np.argpartition(-sims, top - 1, axis=1)[:, :top]
            picked = np.take_along_axis(sims, best, axis=1)
            order = np.argsort(-picked, axis=1, kind="stable")
            self.near[start : start + BLOCK] = rowids[np.take_along_axis(best, order, axis=1)]
            self.sims[start : start + BLOCK] = np.take_along_axis(picked, order, axis=1)

    def of(self, entry_id: str, draft: str) -> list[Related]:
        """The entries related to ``entry_id`` (whose text is ``draft``), best first."""
        conn = self.connection()
        rowid = self.rowid.get(entry_id)
        if rowid is None:
            return []
        nearest: list[tuple[int, float]] = []
        n = self.at.get(rowid)
        near, sims = self.near, self.sims  # set with ``at`` (by _rank_all)
        if (
            n is not None
            and near is not None
            and sims is not None
            and _uses_meaning(self.embedder, draft)
        ):
            nearest = list(zip(near[n].tolist(), sims[n].tolist(), strict=True))
        _, lexical, nearest = ranking.related_parts(
            self.index, conn, draft, self.limit, {entry_id}, False, None, nearest, self.df
        )
        ranked = fusion.fuse(lexical, nearest, self.limit, floor=fusion.RELATED_FLOOR)
        return [self.rows[r] for r, _ in ranked if r in self.rows]
