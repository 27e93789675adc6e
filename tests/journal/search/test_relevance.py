"""Search finds what learners mean: the relevance floors, and the queries of issue #13."""

from __future__ import annotations

import json

from journal_agent.journal import api
from journal_agent.journal.search import ranking
from journal_agent.journal.search.index import SearchIndex

from ..conftest import make_entry
from . import relevance


def test_fused_search_meets_the_floors_on_the_relevance_set(relevance_journal):
    ranked = [
        [h.id for h in api.search(relevance_journal.workspace, query, limit=5)]
        for query, _ in relevance.QUERIES
    ]
    score = relevance.score(ranked)
    assert len(relevance.ENTRIES) >= 40 and score["queries"] >= 60
    assert score["recall@5"] >= 0.9, score
    assert score["mrr@5"] >= 0.8, score


def test_words_alone_still_find_most_entries(relevance_journal):
    # Without the extra search runs on words only: it must stay useful, not just not crash.
    index = SearchIndex(relevance_journal.root)
    ranked = [
        [h.id for h in ranking.search(index, query, limit=5, semantic=False)]
        for query, _ in relevance.QUERIES
    ]
    assert relevance.score(ranked)["recall@5"] >= 0.9


def test_the_four_queries_of_the_issue(ws):
    zero = make_entry(
        title="ZeRO stage 2 shards optimizer state",
        body="ZeRO partitions optimizer states across GPUs.\n",
        tags="#zero",
    )
    warmup = make_entry(
        title="Warmup",
        body="Warmup raises the learning rate linearly over the first steps.\n",
        tags="#schedule",
    )
    other = make_entry(
        title="Activation Checkpointing",
        body="Recompute activations during backward.\n",
        tags="#memory",
    )
    for text in (zero, warmup, other):
        assert api.append_entry(ws.workspace, text).appended
    for query in (
        "optimizer states partition",
        "sharding optimizer",
        "how does zero split the adam state",
    ):
        hits = api.search(ws.workspace, query)
        assert hits and hits[0].title == "ZeRO stage 2 shards optimizer state", query
    for query in ("warm up", "warm-up", "warmup", "WARM-UP"):
        hits = api.search(ws.workspace, query)
        assert hits and hits[0].title == "Warmup", query


def test_all_terms_first_then_ranked_partial_matches_with_the_words_that_matched(ws):
    for title, body in (
        ("Gradient Accumulation", "Gradients add up over micro-batches before the step.\n"),
        ("Gradient Clipping", "Clip the global norm of the gradients.\n"),
        ("Pipeline Bubble", "Stages idle at the start of the schedule.\n"),
    ):
        assert api.append_entry(
            ws.workspace, make_entry(title=title, body=body, tags="#x")
        ).appended
    hits = api.search(ws.workspace, "gradients norm clip bubble")
    by_title = {h.title: h for h in hits}
    # No entry has all four words: the one with three comes first, then those with one.
    assert hits[0].title == "Gradient Clipping"
    assert set(by_title) == {"Gradient Clipping", "Pipeline Bubble", "Gradient Accumulation"}
    assert sorted(by_title["Gradient Clipping"].matched) == ["clip", "gradients", "norm"]
    assert by_title["Pipeline Bubble"].matched == ("bubble",)
    assert by_title["Gradient Accumulation"].matched == ("gradients",)
    assert "[" in hits[0].snippet  # the snippet marks the words that matched


def test_synonyms_abbreviations_typos_and_chinese(ws):
    entries = {
        "BFloat16 Training": "Training in bfloat16 keeps the fp32 exponent range.\n",
        "Key-Value Cache": "The key value cache stores past keys and values.\n",
        "Out of Memory Errors": "CUDA out of memory at the first backward.\n",
        "混合精度 Mixed Precision": "Autocast runs matmuls in half precision.\n",
    }
    for title, body in entries.items():
        assert api.append_entry(
            ws.workspace, make_entry(title=title, body=body, tags="#t")
        ).appended
    expectations = {
        "bf16": "BFloat16 Training",
        "kv cache": "Key-Value Cache",
        "kvcache": "Key-Value Cache",
        "OOM": "Out of Memory Errors",
        "显存不足": "Out of Memory Errors",
        "AMP": "混合精度 Mixed Precision",
        "混合精度": "混合精度 Mixed Precision",
        "brain float": "BFloat16 Training",
        "bfloat": "BFloat16 Training",  # a typo: one letter short of an indexed word
    }
    for query, title in expectations.items():
        hits = api.search(ws.workspace, query)
        assert hits and hits[0].title == title, (query, [h.title for h in hits])


def test_project_synonyms_extend_the_packaged_list(ws):
    assert api.append_entry(
        ws.workspace,
        make_entry(title="Muon Optimizer", body="Orthogonalized momentum.\n", tags="#t"),
    ).appended
    assert api.search(ws.workspace, "newton schulz") == []
    ws.write(".journal/synonyms.txt", "# ours\nmuon | newton schulz\n")
    assert [h.title for h in api.search(ws.workspace, "newton schulz")] == ["Muon Optimizer"]


def test_search_json_says_why_each_entry_matched(relevance_journal, cli):
    env = {"JOURNAL_AGENT_ROOT": str(relevance_journal.root), "NO_COLOR": "1"}
    question = "how does zero split the adam state"
    proc = cli("journal", "search", question, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    zero1 = next(h for h in hits if h["id"] == "rel-zero1")
    assert "adam state" in zero1["matched"] and zero1["meaning"] > 0.3
    text = cli("journal", "search", "why does my loss suddenly jump", env=env)
    assert text.stdout.startswith("2026-11-")
    assert "(words: loss" in text.stdout and "meaning 0." in text.stdout
