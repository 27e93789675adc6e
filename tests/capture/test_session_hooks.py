"""SessionStart (one line when something is due), UserPromptSubmit (recall, logged; injected only
when asked) and SessionEnd (a proposed 📚 row, applied only on request)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.capture.hook_helpers import (
    inbox_lines,
    insight,
    proposals_after_session_end,
    run_hook,
)
from tests.entries import render_entry
from tests.trust_helpers import write_settings

# A search builds the words index, which is what recall reads (meaning off: no model).
NO_MEANING = {"JOURNAL_AGENT_EMBEDDING_MODEL": "off"}


def _journal(root, *entries: tuple[str, str, str]) -> None:
    text = "# Learning Journal\n\n" + "\n".join(
        render_entry(
            title,
            "2026-11-20",
            context="Studying the trainer.",
            question=f"What about {title}?",
            intuition=body,
            tags="#memory",
        )
        for title, body, _ in entries
    )
    (root / "learning_journal.md").write_text(text)


def _capture_one(root, text: str) -> None:
    payload = {"session_id": "s1", "last_assistant_message": insight(text)}
    assert run_hook("Stop", payload, root).returncode == 0


def test_session_start_prints_nothing_when_nothing_is_due(project):
    done = run_hook("SessionStart", {"session_id": "s1", "source": "startup"}, project)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not (project / ".journal").exists()  # an unrelated project is left as it was


def test_session_start_says_what_is_due_in_one_short_line(project):
    from journal_agent.learning import review
    from journal_agent.tokenizer import encoding
    from journal_agent.workspace import Workspace

    _journal(project, ("ZeRO stage 2", "Gradients are sharded.", ""))
    [item] = [i.id for i in review.collect_items(Workspace(project))]
    review.rate(Workspace(project), item, "again", now=datetime.now(UTC) - timedelta(days=3))
    _capture_one(project, "Optimizer states dominate AdamW memory.")
    _capture_one(project, "bf16 keeps the exponent range of fp32.")

    done = run_hook("SessionStart", {"session_id": "s2", "source": "startup"}, project)

    line = done.stdout.decode()
    assert done.returncode == 0 and line.count("\n") == 1
    assert line.startswith("journal-agent: 1 review due (`journal-agent review`); ")
    assert "2 captured learning moments waiting in the inbox" in line
    assert len(encoding().encode(line)) <= 60


def test_session_start_names_moved_references_apart_from_changed_ones(project):
    """A line inserted at the top of a file moves the references below it: `check --fix`
    updates those, so they are not stale. Only lines that changed are (issue #24)."""
    from journal_agent.capture import status
    from journal_agent.journal import api
    from journal_agent.tokenizer import encoding
    from journal_agent.workspace import Workspace

    (project / "ds.json").write_text('{\n  "stage": 2,\n  "overlap_comm": true\n}\n')
    entry = render_entry(
        "ZeRO stage 2",
        "2026-11-20",
        context="Reading `train.py:4-6`, `train.py:10-12` and `ds.json:2-3`.",
        question="Why shard gradients?",
        intuition="Each rank keeps only its shard.",
        tags="#zero",
    )
    assert api.append_entry(Workspace(project), entry).appended
    train = project / "train.py"
    train.write_text("# a new first line\n" + train.read_text())
    (project / "ds.json").write_text('{\n  "stage": 3,\n  "overlap_comm": true\n}\n')

    assert run_hook("refresh", b"", project).returncode == 0  # the detached child's work
    line = run_hook("SessionStart", {"session_id": "s1"}, project).stdout.decode()
    assert line == (
        "journal-agent: 1 code reference in the journal now pointing at changed lines "
        "(`journal-agent journal check`); 2 references moved "
        "(`journal-agent journal check --fix`).\n"
    )
    assert len(encoding().encode(line)) <= 60

    api.fix_refs(Workspace(project))  # rewrites refs.jsonl: the next refresh recounts at once
    assert status.needs_refresh(project)
    run_hook("refresh", b"", project)
    line = run_hook("SessionStart", {"session_id": "s2"}, project).stdout.decode()
    assert "moved" not in line and "1 code reference in the journal now pointing" in line


def test_session_start_prints_nothing_inside_a_subagent_or_when_turned_off(project):
    _capture_one(project, "Something waiting.")
    sub = {"session_id": "s1", "source": "startup", "agent_id": "a1", "agent_type": "Explore"}
    assert run_hook("SessionStart", sub, project).stdout == b""
    write_settings(project, ".journal/settings.json", '{"capture": {"session_start": false}}')
    assert run_hook("SessionStart", {"session_id": "s1"}, project).stdout == b""


def test_a_task_notification_prompt_is_dropped(project, cli):
    _journal(project, ("Activation checkpointing", "Recompute activations in backward.", ""))
    cli("journal", "search", "x", "--root", str(project), env=NO_MEANING)
    note = (
        "<task-notification><result>activation checkpointing recompute</result></task-notification>"
    )
    done = run_hook("UserPromptSubmit", {"session_id": "s1", "prompt": note}, project)
    assert done.stdout == b""
    assert not (project / ".journal" / "capture" / "recall.jsonl").exists()


def test_recall_is_logged_and_injected_only_when_turned_on(project, cli):
    _journal(
        project,
        ("Activation checkpointing", "Recompute activations during backward to save memory.", ""),
        ("Learning rate warmup", "Warmup keeps early Adam steps small.", ""),
    )
    cli("journal", "search", "x", "--root", str(project), env=NO_MEANING)
    prompt = {"session_id": "s1", "prompt_id": "p1", "prompt": "Should I recompute activations?"}

    done = run_hook("UserPromptSubmit", prompt, project)
    assert (done.returncode, done.stdout) == (0, b"")
    [logged] = [
        json.loads(x) for x in (project / ".journal/capture/recall.jsonl").read_text().splitlines()
    ]
    assert [h["title"] for h in logged["hits"]] == ["Activation checkpointing"]
    assert logged["prompt_id"] == "p1" and "recompute" not in json.dumps(logged).lower()

    write_settings(project, ".journal/settings.json", '{"capture": {"recall_inject": true}}')
    injected = run_hook("UserPromptSubmit", prompt, project).stdout.decode()
    assert injected.startswith("journal-agent: related entries in learning_journal.md: ")
    assert '"Activation checkpointing" (id ' in injected

    unrelated = {**prompt, "prompt": "Rename the variable in the parser please"}
    assert run_hook("UserPromptSubmit", unrelated, project).stdout == b""


def test_session_end_proposes_a_session_row_that_ledger_apply_applies(project, transcript, cli):
    transcript.prompt("tune warmup")
    transcript.edit("train.py", "line 3", "line 3 warmup=500")
    final = insight("Warmup steps are counted before the schedule starts.")
    transcript.say(final)
    stop = {
        "session_id": "s1",
        "transcript_path": str(transcript.path),
        "last_assistant_message": final,
    }
    run_hook("Stop", stop, project)

    done = run_hook("SessionEnd", {"session_id": "s1", "reason": "other"}, project)
    assert (done.returncode, done.stdout) == (0, b"")
    [proposal] = proposals_after_session_end(project)  # the detached child's work
    [op] = json.loads(proposal.read_text())["operations"]
    assert op["op"] == "add_session" and op["topic"] == "worked on train.py"
    assert op["outcome"].endswith("1 learning moment captured; files: train.py")
    assert not (project / "learning_ledger.md").exists()  # proposed, never applied silently

    applied = cli("ledger", "apply", str(proposal), "--root", str(project))
    assert applied.returncode == 0, applied.stderr
    assert "worked on train.py" in (project / "learning_ledger.md").read_text()
    line = run_hook("SessionStart", {"session_id": "s2"}, project).stdout.decode()
    assert "1 session row proposed for the ledger" in line


def test_session_end_of_an_idle_session_proposes_nothing(project):
    run_hook("SessionEnd", {"session_id": "s9", "reason": "other"}, project)
    assert not (project / ".journal").exists()
    assert inbox_lines(project) == []


def test_the_documented_defaults_are_the_hooks_defaults():
    import re
    from pathlib import Path

    from journal_agent.capture.settings import DEFAULTS, LIMITS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "plugin.md").read_text()
    block = re.search(r"\(defaults shown\):\n\n```json\n(.*?)```", doc, re.S).group(1)
    assert json.loads(block) == {"capture": {**DEFAULTS, **LIMITS}}


def test_recall_finds_the_words_its_former_regex_found():
    """recall.words splits without ``re`` (an import every prompt would pay); it must find the
    same words as ``[A-Za-z][A-Za-z0-9]{3,}`` did, whatever the text."""
    import random
    import re

    from journal_agent.capture.recall import words

    rng = random.Random(3)
    alphabet = "aZ9_ -.é中İıſK\u212a\n\t'\"0x" + "abcdefXYZ12345"
    texts = ["Why does ZeRO-2 shard fp16 grads? 3rd try, x86_64, naïve café1234 ĳk"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    for text in texts:
        want = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]{3,}", text)]
        assert words(text) == want, text


def test_session_start_counts_the_drafts_waiting_to_be_accepted(project):
    """Drafts `inbox draft` wrote are named with the command that lists them; the agents' own
    scratch drafts (no header), symlinks and a FIFO in the folder are not drafts, and a FIFO
    does not hold the session's start."""
    import os

    from journal_agent.capture import drafts, status
    from journal_agent.tokenizer import encoding

    _capture_one(project, "Warm-up is counted in optimizer steps.")
    for n, title in enumerate(("Warm-up Steps", "Loss Scaling")):
        text = render_entry(
            title,
            "2026-11-26",
            context="Studying the trainer.",
            question=f"What about {title}?",
            intuition="Counted per optimizer step.",
            tags="#training",
        )
        drafts.save(project, text, moments=[f"m{n}"], model="haiku")
    folder = project / ".journal" / "drafts"
    (folder / "scratch.md").write_text("## An agent's own draft\n")
    (folder / "linked.md").symlink_to(folder / f"{drafts.list_drafts(project)[0].id}.md")
    os.mkfifo(folder / "pipe.md")
    assert status.waiting_drafts(project) == len(drafts.list_drafts(project)) == 2

    done = run_hook("SessionStart", {"session_id": "s1", "source": "startup"}, project)

    line = done.stdout.decode()
    assert done.returncode == 0 and line.count("\n") == 1
    assert "1 captured learning moment waiting in the inbox" in line
    assert line.endswith("; 2 drafts to accept (`journal-agent inbox drafts`).\n")
    assert len(encoding().encode(line)) <= 60

    for draft in drafts.list_drafts(project):
        drafts.reject(project, draft.id)
    line = run_hook("SessionStart", {"session_id": "s2"}, project).stdout.decode()
    assert "draft" not in line and "1 captured learning moment" in line
