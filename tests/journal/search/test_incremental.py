"""The index follows hand edits by re-indexing the edited stretch only, and stays exact."""

from __future__ import annotations

import sqlite3

import pytest

from journal_agent.journal import api
from journal_agent.journal.model import parse_journal
from journal_agent.journal.search.index import SearchIndex

from ..conftest import make_entry

TITLES = ["Alpha Sharding", "Beta Pipelines", "Gamma Kernels", "Delta Allocators", "Epsilon Loss"]


@pytest.fixture
def journal(ws):
    for n, title in enumerate(TITLES):
        body = f"Marker{n} topic words for {title.split()[1].lower()}.\n"
        assert api.append_entry(
            ws.workspace, make_entry(title=title, body=body, tags=f"#t{n}")
        ).appended
    return ws


def _indexed(ws) -> list[tuple]:
    """The index's rows, as a fresh full rebuild from the markdown would make them."""
    conn = sqlite3.connect(ws.root / ".journal/index.sqlite")
    rows = conn.execute(
        "SELECT e.id, e.title, e.line, e.start, e.size, f.body FROM entries e "
        "JOIN entries_fts f ON f.rowid = e.rowid ORDER BY e.start"
    ).fetchall()
    # An append indexes the entry as written; the blank line written before the next one then
    # joins it in the markdown: the same words, so only whitespace may differ.
    return [(*row[:5], " ".join(row[5].split())) for row in rows]


def _expected(ws) -> list[tuple]:
    data = ws.journal.read_bytes()
    journal = parse_journal(data.decode("utf-8"))
    out, offset = [], len(journal.preamble.encode())
    for e in journal.entries:
        size = len(e.raw.encode())
        out.append((e.id, e.title, e.start_line, offset, size, " ".join(e.body.split())))
        offset += size
    return out


def _edit(ws, old: str, new: str) -> None:
    text = ws.journal.read_text(encoding="utf-8")
    assert old in text
    ws.journal.write_text(text.replace(old, new, 1), encoding="utf-8")


EDITS = {
    "a word in the middle entry": ("Marker2 topic", "Marker2 edited topic"),
    "a paragraph at the end of an entry": (
        "Marker1 topic words for pipelines.\n",
        "Marker1 topic words for pipelines.\n\nMore text\nover lines.\n",
    ),
    "a new entry between two": (
        "## Gamma Kernels",
        "## Inserted Entry (2026-11-22)\n\nNew.\n\n## Gamma Kernels",
    ),
    "an entry deleted": ("## Delta Allocators (2026-11-21)", "### no longer an entry"),
    "the header": ("# Learning Journal\n", "# Learning Journal\n\nMy notes.\n"),
    "the first entry's title": ("## Alpha Sharding (", "## Alpha Sharding Renamed ("),
    "the last entry": ("Marker4 topic", "Marker4 changed topic"),
    "a code block left open": ("Marker3 topic", "```python\nMarker3 topic"),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_a_hand_edit_leaves_the_index_as_a_full_rebuild_would(journal, what):
    api.search(journal.workspace, "topic")
    _edit(journal, *EDITS[what])
    api.search(journal.workspace, "topic")
    assert _indexed(journal) == _expected(journal)


def test_an_edit_reindexes_only_the_edited_entries(journal):
    api.search(journal.workspace, "topic")
    conn = sqlite3.connect(journal.root / ".journal/index.sqlite")
    before = dict(conn.execute("SELECT id, rowid FROM entries"))
    _edit(journal, "Marker2 topic", "Marker2 edited topic")
    assert [h.title for h in api.search(journal.workspace, "edited")] == ["Gamma Kernels"]
    after = dict(conn.execute("SELECT id, rowid FROM entries"))
    changed = {k for k in before if before[k] != after.get(k)}
    # Gamma was edited; Beta is re-read too (text added at its end would belong to it).
    assert changed <= {"gamma-kernels-2026-11-21", "beta-pipelines-2026-11-21"}
    assert "gamma-kernels-2026-11-21" in changed


def test_hand_written_entries_sharing_a_title_keep_their_ids_in_order(ws):
    text = "# Learning Journal\n\n" + "".join(
        make_entry(title="Same", body=f"Copy{n}.\n") + "\n" for n in range(3)
    )
    ws.journal.write_text(text, encoding="utf-8")
    api.search(ws.workspace, "copy0")
    _edit(ws, "Copy0.", "Copy0 edited.")
    assert [h.id for h in api.search(ws.workspace, "edited")] == ["same-2026-11-21"]
    _edit(ws, "## Same (2026-11-21)\n\n**Context**", "### gone\n\n**Context**")
    api.search(ws.workspace, "copy1")
    assert _indexed(ws) == _expected(ws)
    assert [h.id for h in api.search(ws.workspace, "copy1")] == ["same-2026-11-21"]


def test_backlinks_come_from_related_concepts_sections(ws):
    assert api.append_entry(ws.workspace, make_entry(title="ZeRO Stage 2", tags="#zero")).appended
    linking = make_entry(
        title="FSDP Sharding",
        body="FSDP shards parameters per unit.\n\n### 🔗 Related Concepts\n"
        "- **ZeRO Stage 2** (2026-11-21) — the DeepSpeed version\n",
        tags="#fsdp",
    )
    assert api.append_entry(ws.workspace, linking).appended
    mentions = make_entry(
        title="Pipeline Bubble", body="ZeRO Stage 2 is mentioned but not linked.\n", tags="#pp"
    )
    assert api.append_entry(ws.workspace, mentions).appended
    links = api.backlinks(ws.workspace, "zero-stage-2-2026-11-21")
    assert [link["id"] for link in links] == ["fsdp-sharding-2026-11-21"]
    proc = ws.cli("show", "zero-stage-2-2026-11-21")
    assert proc.stdout.startswith("## ZeRO Stage 2 (2026-11-21)\n")
    assert proc.stdout.rstrip().endswith(
        "← linked from (🔗 Related Concepts of):\n"
        "- **FSDP Sharding** (2026-11-21) — entry `fsdp-sharding-2026-11-21`"
    )
    assert ws.cli("show", "fsdp-sharding-2026-11-21", "--json").stdout.count('"backlinks": []') == 1


def test_related_suggests_the_entries_a_draft_should_link_to(relevance_journal):
    draft = make_entry(
        title="ZeRO++ Quantized Communication",
        date="2026-11-29",
        body="ZeRO++ quantizes the weights before the all-gather of ZeRO-3 and the gradients "
        "before the reduce-scatter, cutting cross-node traffic.\n",
        tags="#zero",
    )
    ids = [h.id for h in api.related(relevance_journal.workspace, draft, limit=5)]
    zero = {"rel-zero1", "rel-zero2", "rel-zero3", "rel-zero-offload"}
    assert set(ids[:3]) <= zero and "rel-allreduce" in ids  # reduce-scatter, all-gather


def test_index_survives_deletion_and_a_missing_journal(journal):
    api.search(journal.workspace, "topic")
    (journal.root / ".journal/index.sqlite").unlink()
    assert len(api.search(journal.workspace, "marker0")) >= 1
    assert _indexed(journal) == _expected(journal)
    SearchIndex(journal.root).stats()
