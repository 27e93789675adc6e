"""The near-duplicate rule, held to the numbers docs/journal.md reports on the calibration set
(tests/journal/search/duplicate_pairs.py): refused only on strong evidence, warned otherwise."""

from __future__ import annotations

import os

from journal_agent.journal import api
from journal_agent.journal.search.embeddings import status

from ..conftest import make_entry
from . import duplicate_pairs


def test_the_calibration_set_is_big_enough():
    assert len(duplicate_pairs.PARAPHRASE_PAIRS) >= 40
    assert len(duplicate_pairs.DISTINCT_PAIRS) >= 40


def test_with_meaning_no_distinct_concept_is_refused_and_every_paraphrase_is_flagged(
    relevance_journal,
):
    assert status(relevance_journal.root) is None, "needs the embeddings extra (.[dev])"
    score = duplicate_pairs.score(relevance_journal.root)
    assert score["refused"]["precision"] == 1.0, score
    assert score["refused"]["recall"] >= 0.55, score
    assert score["flagged"]["recall"] == 1.0, score
    assert score["flagged"]["precision"] >= 0.85, score


def test_with_words_alone_no_distinct_concept_is_refused(relevance_journal):
    os.environ["JOURNAL_AGENT_EMBEDDING_MODEL"] = "off"
    try:
        score = duplicate_pairs.score(relevance_journal.root)
    finally:
        del os.environ["JOURNAL_AGENT_EMBEDDING_MODEL"]
    assert score["refused"]["precision"] == 1.0, score
    assert score["refused"]["recall"] >= 0.55, score
    assert score["flagged"]["recall"] >= 0.95, score


def test_the_paraphrase_of_issue_24_is_at_least_warned_about(ws):
    first = make_entry(
        title="ZeRO stage 2 shards gradients",
        body="ZeRO stage 2 shards the gradients and the optimizer states across data-parallel "
        "ranks: a reduce-scatter leaves each rank the gradient slice it updates.\n",
        tags="#zero #deepspeed",
    )
    assert api.append_entry(ws.workspace, first).appended
    again = make_entry(
        title="How ZeRO-2 partitions gradients",
        body="The second ZeRO stage partitions gradient memory: instead of all-reducing, each "
        "worker receives only the part of the gradients matching its optimizer partition.\n",
        tags="#zero",
    )
    proc = ws.cli("append", "-", stdin=again)
    said = proc.stderr
    refused = (
        proc.returncode == 1 and "this entry repeats **ZeRO stage 2 shards gradients**" in said
    )
    warned = proc.returncode == 0 and "warning: this entry may repeat **ZeRO stage 2" in said
    assert refused or warned, (proc.returncode, said)
