"""No entry written twice: paraphrases are refused, distinct entries on the same topic are not."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from journal_agent.journal import api
from journal_agent.journal.model import parse_journal
from journal_agent.journal.search.duplicates import check_draft
from journal_agent.tools.base import ToolContext
from journal_agent.tools.journal_append import JournalAppend

from ..conftest import make_entry
from . import relevance


def _draft(key: str, fields: tuple[str, str, str, str, str]) -> str:
    return relevance.render(key, fields, 28)


@pytest.mark.parametrize("key", sorted(relevance.PARAPHRASES))
def test_a_paraphrase_of_an_entry_is_refused_naming_it(relevance_journal, key):
    draft = _draft(key, relevance.PARAPHRASES[key])
    check = check_draft(relevance_journal.workspace.index, parse_journal(draft).entries[0])
    assert check.duplicate is not None and check.duplicate.id == relevance.entry_id(key)


@pytest.mark.parametrize("key", sorted(relevance.DISTINCT))
def test_a_distinct_entry_on_the_same_topic_is_accepted(relevance_journal, key):
    draft = _draft(key, relevance.DISTINCT[key])
    check = check_draft(relevance_journal.workspace.index, parse_journal(draft).entries[0])
    assert check.duplicate is None, check.closest[:2]


def test_words_alone_refuse_paraphrases_and_accept_distinct_entries(relevance_journal):
    # Without the embeddings extra the check runs on words: same verdicts on the pairs.
    os.environ["JOURNAL_AGENT_EMBEDDING_MODEL"] = "off"
    try:
        for pairs, refused in ((relevance.PARAPHRASES, True), (relevance.DISTINCT, False)):
            for key, fields in pairs.items():
                entry = parse_journal(_draft(key, fields)).entries[0]
                check = check_draft(relevance_journal.workspace.index, entry)
                assert all(d.meaning is None for d in check.closest)
                assert (check.duplicate is not None) is refused, (key, check.closest[:1])
    finally:
        del os.environ["JOURNAL_AGENT_EMBEDDING_MODEL"]


def test_append_refuses_a_duplicate_with_how_to_proceed_and_force_keeps_both(ws):
    first = make_entry(
        title="LoRA Adapters",
        body="LoRA freezes the weight and trains a low-rank update B·A of rank r.\n",
        tags="#lora",
    )
    assert api.append_entry(ws.workspace, first).appended
    again = first.replace("LoRA Adapters", "LoRA: Low-Rank Adapters")
    proc = ws.cli("append", "-", stdin=again)
    assert proc.returncode == 1
    assert "duplicate" in proc.stderr and "**LoRA Adapters** (2026-11-21" in proc.stderr
    assert "journal show lora-adapters-2026-11-21" in proc.stderr and "--force" in proc.stderr
    assert len(api.load(ws.workspace).entries) == 1
    forced = ws.cli("append", "--force", "-", "--json", stdin=again)
    assert forced.returncode == 0 and json.loads(forced.stdout)["appended"]
    assert len(api.load(ws.workspace).entries) == 2


def test_journal_append_tool_refuses_a_duplicate_and_says_to_edit_instead(ws):
    ctx = ToolContext(root=ws.root)
    assert not JournalAppend().call(ctx, {"entry": make_entry()}).is_error
    result = JournalAppend().call(ctx, {"entry": make_entry(title="ZeRO Stage 2 Explained")})
    assert result.is_error and "duplicate: this entry repeats **ZeRO Stage 2**" in result.content
    assert "with Edit" in result.content
    kept = JournalAppend().call(
        ctx, {"entry": make_entry(title="ZeRO Stage 2 Explained"), "force": True}
    )
    assert not kept.is_error


def test_the_first_entry_and_distinct_entries_go_in(ws):
    for title, body in (
        ("ZeRO Stage 2", "Shards gradients and optimizer states.\n"),
        ("Pipeline Bubble", "Stages idle while the pipeline fills and drains.\n"),
    ):
        outcome = api.append_entry(ws.workspace, make_entry(title=title, body=body))
        assert outcome.appended and outcome.problems == []


def test_two_sessions_appending_the_same_entry_at_once_land_it_once(ws, cli):
    # Two real processes check the same paraphrase against the same journal, then both wait
    # on the journal lock (held here until both say so): the second to write must check again.
    from journal_agent.journal.store import JournalStore
    from journal_agent.locks import held

    assert api.append_entry(ws.workspace, make_entry(title="Pipeline Bubble")).appended
    lora = make_entry(
        title="LoRA Adapters",
        body="LoRA freezes the weight and trains a low-rank update B·A of rank r.\n",
        tags="#lora",
    )
    drafts = (lora, lora.replace("LoRA Adapters", "LoRA: Low-Rank Adapters"))
    env = cli.environment({"JOURNAL_AGENT_ROOT": str(ws.root), "NO_COLOR": "1"})
    store = JournalStore(ws.root)
    with held(store.lock_path, 60, "the test could not take the journal lock"):
        procs = [
            subprocess.Popen(
                cli.command("--verbose", "journal", "append", "-"),
                cwd=ws.root,
                env=env,
                stdin=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            for _ in drafts
        ]
        waiting = []
        for proc, draft in zip(procs, drafts, strict=True):
            proc.stdin.write(draft)
            proc.stdin.close()
        for proc in procs:
            line = ""
            while "waiting for" not in line:  # the duplicate check is done, the write is next
                line = proc.stderr.readline()
                assert line, f"exited before waiting for the lock (exit {proc.wait()})"
            waiting.append(line)
    codes = sorted(proc.wait(timeout=120) for proc in procs)
    errors = "".join(proc.stderr.read() for proc in procs)
    assert codes == [0, 1], errors
    titles = [e.title for e in api.load(ws.workspace).entries]
    assert sorted(titles) in (
        ["LoRA Adapters", "Pipeline Bubble"],
        ["LoRA: Low-Rank Adapters", "Pipeline Bubble"],
    )
    assert "duplicate" in errors and "this entry repeats **LoRA" in errors and "--force" in errors
