"""No entry written twice: how close a draft is to the entries already in the journal.

Two measures, each compared with its own threshold (set on the paraphrase and same-topic pairs
of tests/journal/search/relevance.py, see test_duplicates.py):

- **meaning**: cosine similarity of the all-MiniLM-L6-v2 vectors of the draft and the entry
  (the text ``embeddings.embed_text`` makes of each), when the embeddings extra is installed;
- **words**: cosine similarity of their TF-IDF vectors over stemmed words, which
  needs nothing but SQLite, so the check works without the extra too.

Candidates are the entries ``related`` finds for the draft, so the check costs one search.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from journal_agent.journal.model import Entry

if TYPE_CHECKING:
    import numpy as np

    from journal_agent.journal.search.embeddings import Embedder
    from journal_agent.journal.search.index import SearchIndex

# The rule is chosen on the calibration set in tests/journal/search/duplicate_pairs.py: 43
# paraphrases of entries of the relevance journal, written in other words, and 43 distinct
# concepts on the same topics (test_duplicate_calibration.py holds it to the numbers that
# docs/journal.md reports). Paraphrases score 0.67–0.93 by meaning and 0.40–0.82 by words; the
# distinct drafts reach 0.79 by meaning (warmup-stable-decay beside cosine decay) and 0.49 by
# words (DoRA beside LoRA), never both high at once.
#
# Refused (strong evidence): meaning ≥ 0.82 alone, or meaning ≥ 0.72 with words ≥ 0.55 — the
# margins over the closest distinct draft are 0.03 by meaning and 0.06 by words — and the two
# titles name a common concept (a word, or spellings of one synonym): entries sharing a
# template but titled "Gradient Accumulation" and "FSDP Sharding" are two entries, however
# alike their text. Strong evidence under titles in other words is only warned about.
REFUSE_MEANING = 0.82
REFUSE_MEANING_WITH_WORDS = (0.72, 0.55)
# Warned (weak evidence: the draft is appended, naming the entry it may repeat): meaning ≥ 0.65
# with words ≥ 0.35. Every paraphrase of the set is at least warned about.
WARN_MEANING_WITH_WORDS = (0.65, 0.35)
# Without the embeddings extra the words decide alone: refused at ≥ 0.55 (with a common
# concept in the titles), warned at ≥ 0.45.
WORDS_THRESHOLD = 0.55
WARN_WORDS = 0.45
CANDIDATES = 5


@dataclass(frozen=True)
class Duplicate:
    id: str
    title: str
    date: str
    line: int
    meaning: float | None
    words: float
    same_concept: bool = True

    def describe(self) -> str:
        scores = f"words {self.words:.2f}"
        if self.meaning is not None:
            scores = f"meaning {self.meaning:.2f}, " + scores
        return f"**{self.title}** ({self.date}, id {self.id}, line {self.line}; {scores})"


@dataclass
class Check:
    duplicate: Duplicate | None  # refused: the draft repeats this entry
    closest: list[Duplicate]  # the candidates with their scores, closest first
    vector: np.ndarray | None = None  # the draft's vector, to cache for the appended entry
    embedder: Embedder | None = None
    similar: Duplicate | None = None  # warned: the draft may repeat this entry


def check_draft(index: SearchIndex, entry: Entry, vector: np.ndarray | None = None) -> Check:
    """Compare a parsed draft with the journal ``index`` covers; ``duplicate`` is set when it
    repeats an entry. ``vector``: the draft's, when an earlier check computed it."""
    from journal_agent.journal.search import fusion, ranking
    from journal_agent.journal.search.embeddings import Unavailable, embed_text, get_embedder
    from journal_agent.journal.search.query import concepts, load_synonyms

    text = embed_text(entry.title, " ".join(entry.tags), entry.body)
    embedder = None
    try:
        embedder = get_embedder(index.root)
        if vector is None:
            vector = embedder.encode([text], fusion.ENTRY_TOKENS)[0]
    except Unavailable:
        vector = None
    conn = index.connect()
    try:
        index.ensure_fresh(conn)
        hits = ranking.related_in(
            index, conn, entry.raw, CANDIDATES, set(), vector is not None, vector
        )
        rowids = dict(
            conn.execute(
                f"SELECT id, rowid FROM entries WHERE id IN ({','.join('?' * len(hits))})",
                [h.id for h in hits],
            )
        )
        texts = index.entry_texts(conn, list(rowids.values()))
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0] or 1

        bags = {rowid: _bag(embed_text(*texts[rowid])) for rowid in texts}
        draft_bag = _bag(text)
        # Document frequencies of every word involved, in one pass over the vocabulary rows
        # that matter (one query per word cost 130 ms at 10,000 entries).
        words = sorted(set(draft_bag).union(*bags.values()))
        counts: dict[str, int] = {}
        for start in range(0, len(words), 500):
            chunk = words[start : start + 500]
            counts.update(
                conn.execute(
                    "SELECT term, doc FROM entries_vocab WHERE term IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            )

        def df(term: str) -> int:
            return counts.get(term, 0)

        draft_words = _weights(draft_bag, df, total)
        synonyms = load_synonyms(index.root)
        draft_concepts = concepts(entry.title, synonyms)
        closest = []
        for hit in hits:
            rowid = rowids.get(hit.id)
            if rowid is None or rowid not in texts:
                continue
            similarity = _cosine(draft_words, _weights(bags[rowid], df, total))
            shared = bool(draft_concepts & concepts(hit.title, synonyms))
            closest.append(
                Duplicate(hit.id, hit.title, hit.date, hit.line, hit.meaning, similarity, shared)
            )
    finally:
        conn.close()
    closest.sort(key=lambda d: -(d.meaning if d.meaning is not None else d.words))
    duplicate = next((d for d in closest if is_duplicate(d)), None)
    similar = None if duplicate else next((d for d in closest if is_similar(d)), None)
    return Check(duplicate, closest, vector, embedder, similar)


def is_duplicate(d: Duplicate) -> bool:
    """Strong evidence that the draft repeats the entry: it is refused."""
    return d.same_concept and _strong(d)


def _strong(d: Duplicate) -> bool:
    if d.meaning is None:
        return d.words >= WORDS_THRESHOLD
    meaning, words = REFUSE_MEANING_WITH_WORDS
    return d.meaning >= REFUSE_MEANING or (d.meaning >= meaning and d.words >= words)


def is_similar(d: Duplicate) -> bool:
    """Weak evidence: the draft goes in, with a warning naming the entry."""
    if _strong(d):
        return True
    if d.meaning is None:
        return d.words >= WARN_WORDS
    meaning, words = WARN_MEANING_WITH_WORDS
    return d.meaning >= meaning and d.words >= words


def _bag(text: str) -> Counter[str]:
    from journal_agent.journal.search.hits import useful
    from journal_agent.journal.search.query import stems

    return Counter(w for w in stems(text) if useful(w))


def _weights(bag: Counter[str], df: Any, total: int) -> dict[str, float]:
    return {w: (1 + math.log(n)) * math.log(1 + total / (1 + df(w))) for w, n in bag.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0
