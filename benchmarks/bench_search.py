"""Search relevance on the relevance set in tests/journal/search/relevance.py; prints JSON.

MRR@5 and recall@5 (a query counts as found when one of its expected entries is in the top 5)
for BM25 alone (words: stems, synonyms, compounds, typos), embeddings alone (meaning), and the
two fused by reciprocal rank — the ranking `journal search` uses. Per-query ranks are listed
with --verbose. The floors (fused recall@5 ≥ 0.9, MRR@5 ≥ 0.8) are asserted by
tests/journal/search/test_relevance.py.

    python benchmarks/bench_search.py [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the relevance set, in tests/

from journal_agent.journal.search import fusion, ranking
from journal_agent.journal.search.index import SearchIndex
from tests.journal.search import relevance

FLOORS = {"recall@5": 0.9, "mrr@5": 0.8}


def rankings(root: Path) -> dict[str, list[list[str]]]:
    index = SearchIndex(root)
    out: dict[str, list[list[str]]] = {"bm25": [], "embeddings": [], "fused": []}
    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        ids = dict(conn.execute("SELECT rowid, id FROM entries"))
        for query, _ in relevance.QUERIES:
            plan = index.plan(conn, query)
            out["bm25"].append([ids[h.rowid] for h in index.lexical(conn, plan, [], 30)])
            nearest, _ = fusion.nearest(index, conn, query, [], 30)
            out["embeddings"].append([ids[r] for r, _ in nearest])
    finally:
        conn.close()
    queries = [q for q, _ in relevance.QUERIES]
    out["fused"] = [[h.id for h in ranking.search(index, q, limit=10)] for q in queries]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="rank of each query's entry")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        root = Path(tmp)
        relevance.write_journal(root)
        t = time.perf_counter()
        embedded, _ = fusion.embed_missing(SearchIndex(root))
        embed_s = time.perf_counter() - t
        ranked = rankings(root)
    results = {name: relevance.score(lists) for name, lists in ranked.items()}
    out: dict[str, object] = {
        "benchmark": "search",
        "entries": len(relevance.ENTRIES),
        "queries": len(relevance.QUERIES),
        "embedding_s_per_entry": round(embed_s / max(embedded, 1), 3),
        "results": results,
        "floors_fused": FLOORS,
        "meets_floors": all(results["fused"][k] >= v for k, v in FLOORS.items()),
    }
    if args.verbose:
        misses = {}
        for name, lists in ranked.items():
            for (query, expected), ids in zip(relevance.QUERIES, lists, strict=True):
                want = {relevance.entry_id(e) for e in expected}
                rank = next((n for n, e in enumerate(ids, 1) if e in want), None)
                if rank != 1:
                    misses.setdefault(query, {})[name] = rank
        out["not_first"] = misses
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
