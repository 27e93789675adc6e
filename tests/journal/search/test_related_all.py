"""Every entry's related entries at once (the export) are the entries `related` gives each
entry on its own (words and meaning fused), with the vectors from the cache and the
similarities from one matrix product."""

from __future__ import annotations

from journal_agent.journal.search import ranking
from journal_agent.journal.search.embeddings import status
from journal_agent.journal.search.index import SearchIndex
from journal_agent.journal.search.related_all import RelatedAll, related


def test_related_for_all_entries_at_once_is_each_entrys_own(relevance_journal):
    root = relevance_journal.root
    assert status(root) is None, "needs the embeddings extra (.[dev])"
    everything = RelatedAll(root)
    conn = SearchIndex(root).connect()
    rows = conn.execute("SELECT id, start, size FROM entries ORDER BY start").fetchall()
    conn.close()
    data = (root / "learning_journal.md").read_bytes()
    listed = 0
    for entry_id, start, size in rows:
        draft = data[start : start + size].decode("utf-8")
        alone = [h.id for h in ranking.related(SearchIndex(root), draft, 5, {entry_id})]
        assert [h.id for h in related(root, entry_id, draft)] == alone, entry_id
        assert [r.id for r in everything.of(entry_id, draft)] == alone, entry_id
        listed += len(alone)
    assert listed > len(rows)  # most entries have some: the comparison is not of empty lists
