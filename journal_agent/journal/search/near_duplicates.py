"""Near-duplicates already in the journal: two entries the append check would have refused as
one repeating the other (written by hand, appended with ``--force``, or before the check).

The rule is the append's own (:mod:`journal_agent.journal.search.duplicates`, refused level:
meaning and words, the titles naming a common concept). Only pairs whose titles share a concept
are compared — the rule needs that anyway — and a concept most of the journal names ("memory"
in hundreds of titles) makes no pairs (:data:`GROUP_LIMIT`): that keeps ``journal check`` linear
in the journal, at the price of missing a repeat whose titles share only common words. Meaning
is the vectors the cache holds (no entry is embedded here).
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations

from journal_agent.journal.search.duplicates import (
    REFUSE_MEANING_WITH_WORDS,
    Duplicate,
    _bag,
    _weights,
    is_duplicate,
)
from journal_agent.journal.search.index import SearchIndex

GROUP_LIMIT = 40  # entries naming one concept in their titles, at most, for it to make pairs


@dataclass(frozen=True)
class Pair:
    first: str  # the earlier entry's id (in journal order)
    second: str  # the later one, which repeats it
    seen: Duplicate  # the earlier entry as the later one's duplicate check sees it


def near_duplicates(index: SearchIndex) -> list[Pair]:
    """Pairs of entries that repeat each other, in journal order of the later one."""
    from journal_agent.journal.search.query import concepts, load_synonyms
    from journal_agent.journal.search.related_all import _meaning, _positions

    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        rows = conn.execute("SELECT rowid, id, title, date, line FROM entries").fetchall()
        hashes = dict(conn.execute("SELECT rowid, hash FROM entries").fetchall())
        synonyms = load_synonyms(index.root)
        groups: dict[str, list[int]] = defaultdict(list)
        info = {r[0]: r for r in rows}
        for rowid, _, title, _, _ in rows:
            for concept in concepts(title, synonyms):
                groups[concept].append(rowid)
        candidates = {
            (a, b)
            for members in groups.values()
            if 2 <= len(members) <= GROUP_LIMIT
            for a, b in combinations(sorted(members, key=lambda r: info[r][4]), 2)
        }
        if not candidates:
            return []
        involved = sorted({r for pair in candidates for r in pair})
        bags = _bags(index, conn, involved, {r: (info[r][1], hashes[r]) for r in involved})
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0] or 1
        words = sorted(set().union(*bags.values())) if bags else []
        df: dict[str, int] = {}
        for start in range(0, len(words), 500):
            chunk = words[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found = conn.execute(
                f"SELECT term, doc FROM entries_vocab WHERE term IN ({marks})", chunk
            )
            df.update(found.fetchall())
        weights = {r: _weights(bag, lambda t: df.get(t, 0), total) for r, bag in bags.items()}
        _, matrix = _meaning(index, conn)
        at = _positions(matrix) if matrix is not None else {}
    finally:
        conn.close()
    norms = {r: math.sqrt(sum(v * v for v in w.values())) for r, w in weights.items()}
    floor = REFUSE_MEANING_WITH_WORDS[0]  # under it by meaning, a pair is never refused
    out = []
    for a, b in sorted(candidates, key=lambda p: (info[p[1]][4], info[p[0]][4])):
        if a not in weights or b not in weights or not norms[a] or not norms[b]:
            continue
        meaning = None
        if matrix is not None and a in at and b in at:
            meaning = float(matrix.vectors[at[a]] @ matrix.vectors[at[b]])
            if meaning < floor:
                continue
        wa, wb = weights[a], weights[b]
        words = sum(wa[k] * wb[k] for k in wa.keys() & wb.keys()) / (norms[a] * norms[b])
        _, entry_id, title, date, line = info[a]
        seen = Duplicate(entry_id, title, date, line, meaning, words)
        if is_duplicate(seen):
            out.append(Pair(entry_id, info[b][1], seen))
    return out


def _bags(
    index: SearchIndex,
    conn: sqlite3.Connection,
    rowids: list[int],
    keys: dict[int, tuple[str, str]],
) -> dict[int, Counter[str]]:
    """The entries' stemmed words: kept in the index by entry hash, stemmed for those that
    changed (stemming is most of the work: about 2 ms an entry)."""
    from journal_agent.journal.search.embeddings import embed_text
    from journal_agent.lightjson import dumps, loads

    kept = {}
    for start in range(0, len(rowids), 500):
        chunk = [keys[r][0] for r in rowids[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        kept.update(
            {
                i: (h, b)
                for i, h, b in conn.execute(
                    f"SELECT id, hash, bag FROM bags WHERE id IN ({marks})", chunk
                )
            }
        )
    out: dict[int, Counter[str]] = {}
    missing = []
    for r in rowids:
        entry_id, digest = keys[r]
        held = kept.get(entry_id)
        if held is not None and held[0] == digest:
            bag = loads(held[1])
            out[r] = Counter(bag if isinstance(bag, dict) else {})
        else:
            missing.append(r)
    texts = index.entry_texts(conn, missing)
    fresh = []
    for r in missing:
        if r in texts:
            out[r] = _bag(embed_text(*texts[r]))
            fresh.append((keys[r][0], keys[r][1], dumps(dict(out[r]))))
    if fresh:
        conn.executemany("INSERT OR REPLACE INTO bags VALUES (?, ?, ?)", fresh)
    return out
