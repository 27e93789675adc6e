"""Search, tags, freshness of the FTS5 index, migrations, related entries, and the agent tools."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from journal_agent.errors import UserError
from journal_agent.journal import api
from journal_agent.journal.search.schema import MIGRATIONS
from journal_agent.tools.base import ToolContext
from journal_agent.tools.journal_append import JournalAppend
from journal_agent.tools.journal_search import JournalSearch

from ..conftest import make_entry

TOPICS = [
    ("ZeRO Stage 2", "ZeRO shards optimizer states and gradients across GPUs.", "#zero #deepspeed"),
    ("Gradient Accumulation", "Accumulate gradients over micro-batches.", "#training"),
    ("Activation Checkpointing", "Recompute activations in backward.", "#memory #activations"),
    ("FSDP Sharding", "FSDP shards parameters, gradients and optimizer states.", "#fsdp #zero"),
]


@pytest.fixture
def journal(ws):
    for title, body, tags in TOPICS:
        assert api.append_entry(ws.workspace, make_entry(title=title, body=body + "\n", tags=tags))
    return ws


def test_search_ranks_with_bm25_and_shows_entry_date_snippet(journal):
    # Title, tags and body all say ZeRO for the first; only a tag does for the second.
    hits = api.search(journal.workspace, "zero")
    assert [h.title for h in hits] == ["ZeRO Stage 2", "FSDP Sharding"]
    assert hits[0].date == "2026-11-21" and "[ZeRO] shards" in hits[0].snippet
    assert hits[0].score > hits[1].score
    assert hits[0].id == "zero-stage-2-2026-11-21" and hits[0].line == 9


def test_tag_filters(journal):
    assert {h.title for h in api.search(journal.workspace, "shards", ["#zero"])} == {
        "ZeRO Stage 2",
        "FSDP Sharding",
    }
    assert api.search(journal.workspace, "shards", ["#training"]) == []
    assert [h.title for h in api.search(journal.workspace, "", ["#zero", "#fsdp"])] == [
        "FSDP Sharding"
    ]
    proc = journal.cli("search", "gradients", "#training", "--json")
    assert [h["title"] for h in json.loads(proc.stdout)] == ["Gradient Accumulation"]


def test_index_rebuilds_itself_after_a_hand_edit(journal):
    assert api.search(journal.workspace, "pipeline") == []
    text = journal.journal.read_text(encoding="utf-8")
    journal.journal.write_text(
        text + "\n## Pipeline Parallelism (2026-11-22)\nBubbles in the pipeline schedule.\n",
        encoding="utf-8",
    )
    assert [h.title for h in api.search(journal.workspace, "pipeline")] == ["Pipeline Parallelism"]
    journal.journal.write_text(text, encoding="utf-8")
    assert api.search(journal.workspace, "pipeline") == []
    # Edits elsewhere move entries: only changed entries are re-indexed, lines stay right.
    line = api.search(journal.workspace, "recompute")[0].line
    edited = text.replace("# Learning Journal\n", "# Learning Journal\n\nA note.\n", 1)
    edited = edited.replace("Accumulate gradients", "Accumulate gradients (bucketed)")
    journal.journal.write_text(edited, encoding="utf-8")
    assert api.search(journal.workspace, "recompute")[0].line == line + 2
    assert [h.title for h in api.search(journal.workspace, "bucketed")] == ["Gradient Accumulation"]


def test_fts_syntax_errors_get_a_friendly_message(journal):
    with pytest.raises(UserError, match=r"not valid FTS5 syntax.*double quotes"):
        api.search(journal.workspace, '"unbalanced AND')
    # Plain words with punctuation are searched as phrases instead of failing.
    assert [h.title for h in api.search(journal.workspace, "micro-batches")] == [
        "Gradient Accumulation"
    ]
    proc = journal.cli("search", "(zero")
    assert proc.returncode == 1 and proc.stderr.startswith("error: search query")


def test_migrations_are_recorded_once_in_order(journal):
    api.search(journal.workspace, "zero")
    conn = sqlite3.connect(journal.root / ".journal/index.sqlite")
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert names == [name for name, _ in MIGRATIONS]


def test_a_corrupt_index_is_rebuilt(journal):
    (journal.root / ".journal/index.sqlite").write_bytes(b"not a database" * 100)
    assert [h.title for h in api.search(journal.workspace, "recompute")] == [
        "Activation Checkpointing"
    ]


def test_related_entries_for_a_draft(journal):
    draft = make_entry(
        title="ZeRO Stage 3",
        date="2026-11-23",
        body="Stage 3 also shards parameters; like FSDP it gathers them per layer. Optimizer "
        "states and gradients are sharded as in stage 2.\n",
    )
    titles = [h.title for h in api.related(journal.workspace, draft, limit=2)]
    assert set(titles) == {"ZeRO Stage 2", "FSDP Sharding"}
    entry = journal.write("draft.md", draft)
    proc = journal.cli("related", "--file", str(entry))
    assert proc.returncode == 0 and "**FSDP Sharding** (2026-11-21)" in proc.stdout


def test_list_and_show(journal):
    proc = journal.cli("list", "--tag", "zero")
    assert proc.returncode == 0
    assert [line.strip().split("  ")[2] for line in proc.stdout.splitlines()] == [
        "ZeRO Stage 2",
        "FSDP Sharding",
    ]
    # --json is printed an entry at a time: the text of json.dumps of the whole list.
    proc = journal.cli("list", "--tag", "zero", "--json")
    rows = json.loads(proc.stdout)
    assert [r["title"] for r in rows] == ["ZeRO Stage 2", "FSDP Sharding"]
    assert proc.stdout == json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    assert journal.cli("list", "--tag", "nothing", "--json").stdout == "[]\n"
    proc = journal.cli("show", "fsdp-sharding-2026-11-21")
    assert proc.stdout.startswith("## FSDP Sharding (2026-11-21)\n")
    assert journal.cli("show", "nothing-like-this").returncode == 1


def test_agent_tools_validate_append_and_search(ws):
    ctx = ToolContext(root=ws.root)
    bad = JournalAppend().call(ctx, {"entry": make_entry(body="It needs 40 GB.\n")})
    assert bad.is_error
    assert "NOT appended" in bad.content and "line 9: unquoted_number" in bad.content
    good = JournalAppend().call(ctx, {"entry": make_entry()})
    assert not good.is_error and "zero-stage-2-2026-11-21" in good.content
    found = JournalSearch().call(ctx, {"query": "DeepSpeed", "tags": ["#zero"]})
    assert not found.is_error and "**ZeRO Stage 2**" in found.content
    related = JournalSearch().call(ctx, {"related_to": "DeepSpeed optimizer states"})
    assert "ZeRO Stage 2" in related.content
    assert JournalSearch().call(ctx, {}).is_error
    schema = JournalAppend.definition()["input_schema"]
    assert schema["required"] == ["entry"] and "force" in schema["properties"]


def test_cjk_words_are_found_inside_longer_runs(ws):
    body = "梯度累积可以节省显存。机制 explained.\n"
    assert api.append_entry(ws.workspace, make_entry(title="显存 机制", body=body)).appended
    assert api.append_entry(ws.workspace, make_entry(title="Other", body="no CJK here\n")).appended
    for query in ("显存", "节省", "梯度累积", '"节省显存"', "显存 explained"):
        assert [h.title for h in api.search(ws.workspace, query)] == ["显存 机制"], query
    assert api.search(ws.workspace, "显卡") == []


@pytest.mark.slow
def test_parallel_searches_and_appends_share_the_index(journal, cli):
    env = cli.environment({"JOURNAL_AGENT_ROOT": str(journal.root)})
    (journal.root / ".journal/index.sqlite").unlink()  # everyone races to build it
    procs = []
    for n in range(3):
        cmd = cli.command("journal")
        procs.append(
            subprocess.Popen(
                [*cmd, "search", "shards"],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
        # Near-identical entries on purpose (the race is under test, not the content): --force
        # keeps the duplicate check from refusing them.
        app = subprocess.Popen(
            [*cmd, "append", "--force", "-"],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        app.stdin.write(make_entry(title=f"Parallel {n}", body="Pipelined shards.\n"))
        app.stdin.close()
        procs.append(app)
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    titles = {h.title for h in api.search(journal.workspace, "pipelined")}
    assert titles == {"Parallel 0", "Parallel 1", "Parallel 2"}
