"""Words and meaning together: nearest entries by embedding, fused with BM25 by reciprocal rank.

Reciprocal-rank fusion (Cormack et al., SIGIR 2009) adds ``1 / (K + rank)`` from each list, so
an entry ranked well by both wins and neither score scale has to be calibrated against the
other. An entry found by meaning alone must also be similar enough (``SEMANTIC_FLOOR``), or a
query about a topic the journal does not have would return its nearest strangers.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from journal_agent.journal.search.embeddings import (
    ENTRY_TOKENS,
    Embedder,
    Unavailable,
    VectorStore,
    embed_text,
    from_blobs,
    get_embedder,
    release_freed_heap,
    text_key,
    to_blob,
)

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from concurrent.futures import Future, ThreadPoolExecutor
    from pathlib import Path

    import numpy as np

    from journal_agent.journal.search.hits import Lexical
    from journal_agent.journal.search.index import SearchIndex

K = 60  # the constant of Cormack et al.; rank 1 scores 1/61, rank 10 scores 1/70
# Cosine similarity (all-MiniLM-L6-v2) an entry found by meaning alone needs to be shown. On the
# relevance set (tests/journal/search/relevance.py) the entry a learner's question was after scores
# 0.35–0.78, and the best *wrong* entry up to 0.5 for a whole question: below 0.45 a hit by
# meaning alone is more often noise than help. (The floor changes which extra entries show;
# the set's MRR and recall are the same at 0.3 and 0.45.)
SEMANTIC_FLOOR = 0.45
RELATED_FLOOR = 0.35  # a draft against entries: whole texts share more background
READY_TIMEOUT_S = 60  # how long meaning waits for the words side to bring the index up to date
FILL_BUDGET = 8  # entries embedded during one search when the cache lacks them (≈ 0.1 s each)


@dataclass
class _Matrix:
    generation: int
    version: int
    rowids: list[int]
    vectors: np.ndarray  # (n, dim)
    missing: list[tuple[int, str]]  # (rowid, embed key) of entries without a vector yet


_CACHE: dict[tuple[str, str], _Matrix] = {}


def nearest(
    index: SearchIndex,
    conn: sqlite3.Connection,
    text: str,
    tags: list[str],
    depth: int,
    as_entry: bool = False,
    vector: np.ndarray | None = None,
) -> tuple[list[tuple[int, float]], str | None]:
    """``([(rowid, cosine)], note)``: the entries nearest in meaning, best first; ``note`` says
    why meaning was not (fully) used, or is None. ``vector``: the text's, when known."""
    import numpy as np

    try:
        embedder = get_embedder(index.root)
    except Unavailable as exc:
        return [], str(exc)
    if vector is None and embedder.english_only and _mostly_cjk(text):
        return [], None
    matrix = _load(index, conn, embedder, fill=FILL_BUDGET)
    note = None
    if matrix.missing:
        total = len(matrix.rowids) + len(matrix.missing)
        note = (
            f"meaning covers {len(matrix.rowids)} of {total} entries; run "
            "`journal-agent journal index` to embed the rest"
        )
    if not matrix.rowids:
        return [], note
    if vector is None and as_entry:
        vector = embedder.encode([draft_text(text)], ENTRY_TOKENS)[0]
    elif vector is None:
        vector = embedder.query(text)
    from journal_agent.journal.search._bert import one_blas_thread

    with one_blas_thread():  # one matrix-vector product: BLAS threads only contend
        sims = matrix.vectors @ vector  # (entries,)
    if tags:
        allowed = _tagged(conn, tags)
        sims = np.where(np.isin(np.asarray(matrix.rowids), list(allowed)), sims, -2.0)
    top = min(depth, len(sims))
    best = np.argpartition(-sims, top - 1)[:top]
    order = best[np.argsort(-sims[best])]
    return [(matrix.rowids[i], float(sims[i])) for i in order if sims[i] > -2.0], note


_POOL: ThreadPoolExecutor | None = None


def nearest_soon(
    index: SearchIndex, text: str, tags: list[str], depth: int, index_ready: threading.Event
) -> Future[tuple[list[tuple[int, float]], str | None]] | None:
    """A future of :func:`nearest`'s answer, worked out on a worker thread while the caller
    searches by words: the query embedded, then — once ``index_ready`` (a
    ``threading.Event``) says the caller has brought the index up to date — ranked against
    the entries' vectors over the worker's own connection. None where meaning will not be
    used (no model, a Chinese query on an English-only model): :func:`nearest` then says why.
    """
    global _POOL
    try:
        embedder = get_embedder(index.root)
    except Unavailable:
        return None
    if embedder.english_only and _mostly_cjk(text):
        return None
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="search-meaning")

    def work() -> tuple[list[tuple[int, float]], str | None]:
        vector = embedder.query(text)
        # The caller sets the event even when it fails; bounded all the same, as this worker
        # serves every later search too. Rows of an index still being rebuilt could name
        # other entries afterwards: no meaning then rather than wrong hits.
        if not index_ready.wait(timeout=READY_TIMEOUT_S):
            return [], "meaning was left out while the search index was being rebuilt"
        conn = index.connect()
        try:
            return nearest(index, conn, text, tags, depth, vector=vector)
        finally:
            conn.close()

    return _POOL.submit(work)


def fuse(
    lexical: list[Lexical],
    nearest: list[tuple[int, float]],
    limit: int,
    floor: float = SEMANTIC_FLOOR,
) -> list[tuple[int, float]]:
    """``[(rowid, fused score)]``, best first."""
    scores: dict[int, float] = {}
    for rank, hit in enumerate(lexical, start=1):
        scores[hit.rowid] = scores.get(hit.rowid, 0.0) + 1.0 / (K + rank)
    found = set(scores)
    for rank, (rowid, similarity) in enumerate(nearest, start=1):
        if rowid in found or similarity >= floor:
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (K + rank)
    return sorted(scores.items(), key=lambda x: -x[1])[:limit]


def draft_text(draft: str) -> str:
    """What a draft entry is embedded from (the same text its appended entry will have)."""
    from journal_agent.journal.model import parse_journal

    entries = parse_journal(draft).entries
    if not entries:
        return " ".join(draft.split())
    entry = entries[0]
    return embed_text(entry.title, " ".join(entry.tags), entry.body)


def remember(root: Path, text: str, vector: np.ndarray, embedder: Embedder) -> None:
    """Cache a vector computed elsewhere (the draft's, at append) under its text."""
    conn = VectorStore(root).connect()
    try:
        _put(conn, embedder.model_id, [(text_key(text), vector)])
    finally:
        conn.close()


def embed_missing(
    index: SearchIndex, progress: Callable[[int, int], object] | None = None
) -> tuple[int, int]:
    """Embed every entry that has no vector yet (``journal index``); returns (done, total)."""
    embedder = get_embedder(index.root)
    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        matrix = _load(index, conn, embedder, fill=0)
        todo = list(matrix.missing)
        for start in range(0, len(todo), 16):
            _embed(index, conn, embedder, todo[start : start + 16])
            if progress is not None:
                progress(min(start + 16, len(todo)), len(todo))
        return len(todo), len(matrix.rowids) + len(todo)
    finally:
        conn.close()


def _load(index: SearchIndex, conn: sqlite3.Connection, embedder: Embedder, fill: int) -> _Matrix:
    vconn = VectorStore(index.root).connect()
    read = False
    try:
        key = (str(index.path), embedder.model_id)
        generation = index.generation(conn)
        version = vconn.execute("SELECT n FROM version").fetchone()[0]
        cached = _CACHE.get(key)
        if cached is None or (cached.generation, cached.version) != (generation, version):
            cached, read = _read(conn, vconn, embedder, generation, version), True
            _CACHE[key] = cached
        if fill and cached.missing:
            _embed(index, conn, embedder, cached.missing[:fill], vconn)
            version = vconn.execute("SELECT n FROM version").fetchone()[0]
            cached, read = _read(conn, vconn, embedder, generation, version), True
            _CACHE[key] = cached
        return cached
    finally:
        vconn.close()
        if read:
            # The bytes read (one object per vector) and SQLite's page cache are freed now;
            # glibc would keep that heap (~20 MB at 10,000 entries) in a long-lived process.
            release_freed_heap()


def _read(
    conn: sqlite3.Connection,
    vconn: sqlite3.Connection,
    embedder: Embedder,
    generation: int,
    version: int,
) -> _Matrix:
    rows = conn.execute("SELECT rowid, embed_key FROM entries ORDER BY rowid").fetchall()
    stored = _stored_vectors(vconn, embedder.model_id, version)
    have = [(rowid, k) for rowid, k in rows if k in stored]
    missing = [(rowid, k) for rowid, k in rows if k not in stored]
    dim = memoryview(stored[have[0][1]]).nbytes // 4 if have else 0
    vectors = from_blobs([stored[k] for _, k in have], dim)
    _share(stored, [k for _, k in have], vectors)
    return _Matrix(generation, version, [r for r, _ in have], vectors, missing)


def _share(stored: dict[str, Any], keys: list[str], vectors: np.ndarray) -> None:
    """The vectors read so far become views of the matrix's rows: one copy of them in memory,
    not two (10,000 × 1.5 kB: 15 MB of a long-lived process). A vector no entry uses now is
    copied out, so that no view keeps an older matrix alive."""
    import numpy as np

    used = set(keys)
    for key, value in stored.items():
        if key not in used and isinstance(value, np.ndarray):
            stored[key] = value.tobytes()
    for key, row in zip(keys, vectors, strict=True):
        stored[key] = row


# Vectors read so far, per cache file and model: after an append only the new rows are read
# (reading all 10,000 again cost 55 ms of every append).
# Each vector is bytes as read, or a view of the matrix's row once a matrix holds it (_share).
# Untyped values: numpy's stubs do not declare ndarray a buffer (memoryview, b"".join take one).
_STORED: dict[tuple[str, str], tuple[int, int, dict[str, Any]]] = {}


def _stored_vectors(vconn: sqlite3.Connection, model: str, version: int) -> dict[str, Any]:
    path = vconn.execute("PRAGMA database_list").fetchone()[2]
    seen_version, last, stored = _STORED.get((path, model), (-1, 0, {}))
    if version < seen_version:  # the cache file was deleted and started over
        last, stored = 0, {}
    for rowid, key, vec in vconn.execute(
        "SELECT rowid, key, vec FROM vectors WHERE model = ? AND rowid > ?", (model, last)
    ):
        stored[key] = vec
        last = max(last, rowid)
    _STORED[(path, model)] = (version, last, stored)
    return stored


def _embed(
    index: SearchIndex,
    conn: sqlite3.Connection,
    embedder: Embedder,
    todo: list[tuple[int, str]],
    vconn: sqlite3.Connection | None = None,
) -> None:
    texts = index.entry_texts(conn, [rowid for rowid, _ in todo])
    items = []
    for rowid, key in todo:
        if rowid in texts:
            text = embed_text(*texts[rowid])
            items.append((key, embedder.encode([text], ENTRY_TOKENS)[0]))
    own = vconn is None
    vconn = vconn or VectorStore(index.root).connect()
    try:
        _put(vconn, embedder.model_id, items)
    finally:
        if own:
            vconn.close()


def _put(vconn: sqlite3.Connection, model: str, items: list[tuple[str, np.ndarray]]) -> None:
    if not items:
        return
    vconn.execute("BEGIN IMMEDIATE")
    try:
        vconn.executemany(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
            [(model, key, to_blob(vec)) for key, vec in items],
        )
        vconn.execute("UPDATE version SET n = n + 1")
        vconn.execute("COMMIT")
    except BaseException:
        vconn.execute("ROLLBACK")
        raise


def _mostly_cjk(text: str) -> bool:
    from journal_agent.journal.search.query import CJK_RUN

    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    return cjk * 2 > len("".join(text.split()))


def _tagged(conn: sqlite3.Connection, tags: list[str]) -> set[int]:
    sets = [
        {r[0] for r in conn.execute("SELECT entry FROM tags WHERE tag = ?", (tag,))} for tag in tags
    ]
    return set.intersection(*sets) if sets else set()
