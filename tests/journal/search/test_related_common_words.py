"""`journal related` on a journal about one subject: every word of a draft is in most entries
(a 70,000-entry journal of benchmarks/bench_memory.py found nothing at all for "zero sharding
optimizer momentum": each of those words was in about 70 % of the entries, and terms in more
than 60 % were dropped as not telling). Then the entries holding them all are related, ranked
by BM25 (titles first) — not none."""

from __future__ import annotations

import random

import pytest

from journal_agent.journal import api
from journal_agent.journal.search import ranking

SUBJECT = ["zero", "sharding", "optimizer", "momentum", "gradient", "memory", "batch", "kernel"]
DRAFT = "## Sharding the optimizer state (2026-11-29)\n\nzero sharding optimizer momentum.\n"


def _entry(n: int, title: str, rng: random.Random) -> str:
    words = " ".join(
        rng.choice(SUBJECT) if rng.random() < 0.7 else f"w{rng.randrange(5000)}" for _ in range(40)
    )
    return (
        f"## {title} (2026-11-{1 + n % 28:02d})\n<!-- entry: e{n} -->\n\n"
        f"**Context**: {words}{' pinned' if n == 100 else ''}.\n\n### 🏷️ Tags\n#training\n\n---\n\n"
    )


@pytest.fixture
def one_subject(ws, monkeypatch):
    monkeypatch.setenv("JOURNAL_AGENT_EMBEDDING_MODEL", "off")  # words alone: what failed
    rng = random.Random(0)
    parts = ["# Learning Journal\n\n"]
    for n in range(300):
        title = "ZeRO sharding of optimizer momentum" if n in (40, 170, 260) else f"Notes {n}"
        parts.append(_entry(n, title, rng))
    ws.write("learning_journal.md", "".join(parts))
    return ws


def test_a_draft_in_the_journals_common_words_finds_the_entries_holding_them(one_subject):
    ws = one_subject
    conn = ws.workspace.index.connect()
    try:
        ws.workspace.index.ensure_fresh(conn)
        total = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        for word in ("zero", "shard", "optim", "momentum"):  # the draft's stems: all common
            doc = conn.execute("SELECT doc FROM entries_vocab WHERE term = ?", (word,)).fetchone()
            assert doc[0] > 0.6 * total, word
        assert ranking.salient_terms(conn, DRAFT)[1]  # common words only
    finally:
        conn.close()
    hits = api.related(ws.workspace, DRAFT, limit=5)
    assert len(hits) == 5
    assert {h.id for h in hits[:3]} == {"e40", "e170", "e260"}  # all four words in the title
    text = ws.root.joinpath("learning_journal.md").read_text().lower()
    for h in hits[3:]:  # the rest hold every word of the draft
        body = text.split(f"<!-- entry: {h.id} -->")[1].split("---")[0]
        assert all(w in body for w in ("zero", "sharding", "optimizer", "momentum")), h.id
    proc = ws.cli("related", "--file", str(ws.write("draft.md", DRAFT)))
    assert proc.returncode == 0 and "ZeRO sharding of optimizer momentum" in proc.stdout


def test_a_rare_word_still_decides_alone(one_subject):
    ws = one_subject
    draft = DRAFT.replace("momentum.", "momentum, pinned.")  # a word one entry holds
    conn = ws.workspace.index.connect()
    try:
        ws.workspace.index.ensure_fresh(conn)
        terms, common = ranking.salient_terms(conn, draft)
    finally:
        conn.close()
    assert len(terms) == 1 and not common
    assert [h.id for h in api.related(ws.workspace, draft, limit=5)] == ["e100"]
