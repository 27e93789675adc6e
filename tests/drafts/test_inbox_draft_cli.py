"""`journal-agent inbox draft / drafts / accept-draft / reject-draft` as a user runs them, the
model served on 127.0.0.1 by the scripted Messages API and called by the real SDK."""

from __future__ import annotations

import json

import pytest

from journal_agent.capture import read_inbox
from journal_agent.drafts import caps
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.drafts.conftest import INSIGHT, KEY, entry, settings

DRAFT_ID = "warm-up-is-counted-in-steps-2026-11-26"


@pytest.fixture
def inbox(cli, project):
    """``inbox(*args, base_url=, key=, env=)``: ``journal-agent inbox ARGS`` on the project."""

    def go(*args, base_url=None, key=KEY, env=None):
        environment = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": base_url, "NO_COLOR": "1"}
        return cli(
            "inbox",
            *args,
            "--root",
            str(project),
            env={**environment, **(env or {})},
            home=project.parent / "home",
        )

    return go


def _drafting_model(text: str) -> ScriptedModel:
    return ScriptedModel(
        [
            reply(tool_use("Read", {"file_path": "train.py"})),
            reply(tool_use("JournalAppend", {"entry": text})),
            reply("Drafted one entry."),
        ]
    )


def _one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_off_by_default_says_how_to_turn_it_on(project, inbox):
    (project / ".journal" / "settings.json").unlink()
    done = inbox("draft")
    assert done.returncode == 1
    assert '"capture": {"draft": true} in .journal/settings.json' in _one_line(done)
    # The switch that turns capture back on does not turn on what spends tokens.
    still_off = inbox("draft", env={"JOURNAL_AGENT_CAPTURE": "1"})
    assert still_off.returncode == 1 and "off by default" in _one_line(still_off)
    settings(project, draft=True)
    off = inbox("draft", env={"JOURNAL_AGENT_CAPTURE": "0"})
    assert off.returncode == 1 and "JOURNAL_AGENT_CAPTURE=0" in _one_line(off)


def test_without_an_api_key_one_sentence_and_nothing_lost(project, inbox):
    done = inbox("draft", key=None)
    assert done.returncode == 2
    line = _one_line(done)
    assert "set ANTHROPIC_API_KEY" in line and "Pro or Max login" in line
    assert [m.text for m in read_inbox(project)] == [INSIGHT]
    assert not (project / ".journal" / "drafts").exists()
    assert not (project / ".journal" / "draft-usage.json").exists()


def test_draft_list_show_and_accept_into_the_journal(project, inbox):
    moment = read_inbox(project)[0]
    model = _drafting_model(entry())
    with model.serve() as url:
        drafted = inbox("draft", base_url=url)
        assert drafted.returncode == 0, drafted.stderr
        assert f"drafted {DRAFT_ID} from moment {moment.id}" in drafted.stdout
        assert not (project / "learning_journal.md").exists()
        # Drafting again skips the moment: it has a draft waiting (no request is made).
        again = inbox("draft", base_url=url)
    assert again.returncode == 0 and f"already drafted as {DRAFT_ID}" in again.stdout
    assert len(model.requests) == 3

    waiting = inbox()
    assert f"(draft {DRAFT_ID} waiting: `inbox drafts`)" in waiting.stdout
    listed = inbox("drafts")
    assert f"  1. {DRAFT_ID}" in listed.stdout and moment.id in listed.stdout
    shown = inbox("drafts", "1")
    assert shown.stdout.endswith(entry()) and moment.id in shown.stdout
    as_json = json.loads(inbox("drafts", "--json").stdout)
    assert [(d["id"], d["moments"]) for d in as_json] == [(DRAFT_ID, [moment.id])]

    accepted = inbox("accept-draft", "1")
    assert accepted.returncode == 0, accepted.stderr
    assert f"appended {DRAFT_ID} at learning_journal.md:" in accepted.stdout
    assert f"marked written: {moment.id}" in accepted.stdout
    journal = (project / "learning_journal.md").read_text()
    heading, body = entry().split("\n", 1)
    assert journal.startswith("# Learning Journal")
    assert f"{heading}\n<!-- entry: {DRAFT_ID} -->\n{body}" in journal
    assert "journal-agent draft" not in journal  # the header stays out of the journal
    # The append path ran: the reference's lines are anchored for later checks.
    (anchors,) = [json.loads(x) for x in (project / ".journal/refs.jsonl").read_text().splitlines()]
    assert anchors["entry"] == DRAFT_ID and "train.py:8" in anchors["refs"]
    assert read_inbox(project) == []
    assert [m.dismissed for m in read_inbox(project, include_dismissed=True)] == ["written"]
    assert json.loads(inbox("drafts", "--json").stdout) == []


def test_accept_runs_the_checks_and_keeps_a_draft_that_fails_them(project, inbox):
    model = _drafting_model(entry())
    with model.serve() as url:
        assert inbox("draft", base_url=url).returncode == 0
    draft = project / ".journal" / "drafts" / f"{DRAFT_ID}.md"
    # The user edits the draft: a reference past the end of the file, a record that does not
    # exist.
    edited = draft.read_text().replace("(train.py:8)", "(train.py:80), 3.2 GB [m:est-00000000]")
    draft.write_text(edited)
    refused = inbox("accept-draft", DRAFT_ID)
    assert refused.returncode == 1
    assert "not appended" in refused.stderr
    assert f"{DRAFT_ID}.md:" in refused.stderr and "train.py:80" in refused.stderr
    assert "est-00000000" in refused.stderr
    assert not (project / "learning_journal.md").exists()
    assert draft.read_text() == edited and [m.text for m in read_inbox(project)] == [INSIGHT]


def test_reject_deletes_the_draft_and_keeps_or_dismisses_the_moment(project, inbox):
    for dismiss in (False, True):
        model = _drafting_model(entry())
        with model.serve() as url:
            assert inbox("draft", base_url=url).returncode == 0
        args = ("reject-draft", "1", *(["--dismiss"] if dismiss else []))
        rejected = inbox(*args)
        assert rejected.returncode == 0 and f"deleted draft {DRAFT_ID}" in rejected.stdout
        assert not (project / ".journal" / "drafts" / f"{DRAFT_ID}.md").exists()
        assert len(read_inbox(project)) == (0 if dismiss else 1)


def test_over_the_daily_cap_one_sentence_nothing_sent(project, inbox):
    settings(project, draft=True, draft_daily_tokens=5_000)
    caps.add_usage(project, 5_000)
    model = ScriptedModel([reply("never")])
    with model.serve() as url:
        done = inbox("draft", base_url=url)
    assert done.returncode == 1
    assert "today's drafting cap is used up (5,000 of 5,000 tokens)" in _one_line(done)
    assert model.requests == []


def test_over_the_per_draft_cap_nothing_sent_and_a_non_zero_exit(project, inbox):
    settings(project, draft=True, draft_max_tokens=1_000)
    model = ScriptedModel([reply("never")])
    with model.serve() as url:
        done = inbox("draft", base_url=url)
    assert done.returncode == 1 and model.requests == []
    assert "was not started" in done.stderr and "nothing was sent" in done.stderr
    assert [m.text for m in read_inbox(project)] == [INSIGHT]


def test_dry_run_needs_no_key_and_sends_nothing(project, inbox):
    (project / ".journal" / "settings.json").unlink()  # even while drafting is off
    moment = read_inbox(project)[0]
    model = ScriptedModel([reply("never")])
    with model.serve() as url:
        done = inbox("draft", "--dry-run", key=None, base_url=url)
    assert done.returncode == 0, done.stderr
    assert model.requests == []
    assert f"moment {moment.id}: claude-haiku" in done.stdout and "fits" in done.stdout
    assert "note: inbox draft is off by default" in done.stdout
    assert done.stdout.endswith("nothing was sent (--dry-run)\n")
    assert not (project / ".journal" / "draft-usage.json").exists()
