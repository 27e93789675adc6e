"""`inbox draft`'s runs: the learning-journal agent through our runtime and the real SDK, against
a scripted Messages API. Whatever the agent asks, only drafts are written."""

from __future__ import annotations

import json
import os

import pytest

from journal_agent.capture import read_inbox
from journal_agent.capture.drafts import list_drafts
from journal_agent.drafts import caps
from journal_agent.drafts.run import draft_moments, preview
from journal_agent.errors import UserError
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.drafts.conftest import KEY, entry, settings


def _draft(project, model: ScriptedModel):
    client = model.client(api_key=KEY)
    home = project.parent / "home"  # not the developer's ~/.claude (agents, settings)
    return list(draft_moments(project, read_inbox(project), client=client, home=home))


def _results(request) -> list[dict]:
    """The tool_result blocks a request sends back."""
    content = request.body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def test_a_draft_lands_in_drafts_with_its_moment_and_never_in_the_journal(project):
    moment = read_inbox(project)[0]
    text = entry()
    model = ScriptedModel(
        [
            reply(tool_use("Read", {"file_path": "train.py"}), usage=_usage(3000, 40)),
            reply(tool_use("JournalAppend", {"entry": text}), usage=_usage(3500, 900)),
            reply("Drafted: warm-up is counted in steps.", usage=_usage(4500, 12)),
        ]
    )
    (done,) = _draft(project, model)

    assert not (project / "learning_journal.md").exists()
    (draft,) = list_drafts(project)
    assert done.drafts == [draft] and done.ok and not done.stopped
    assert draft.path == project / ".journal/drafts/warm-up-is-counted-in-steps-2026-11-26.md"
    assert draft.text == text and draft.moments == (moment.id,)
    assert draft.path.read_text().startswith("<!-- journal-agent draft {")
    # The agent's own definition ran: its system prompt and its model (haiku), with the moment
    # and its file in the first message, and no tool that could write elsewhere.
    first = model.requests[0].body
    assert "learning journal assistant" in model.requests[0].system_text
    assert first["model"].startswith("claude-haiku")
    prompt = first["messages"][0]["content"]
    prompt = prompt if isinstance(prompt, str) else prompt[0]["text"]
    assert moment.text in prompt and "train.py:8" in prompt
    offered = {t["name"] for t in first["tools"]}
    assert {"Read", "JournalAppend", "Write", "Edit"} <= offered
    assert not offered & {"Bash", "LedgerUpdate", "JournalInbox", "MemoryProfile", "Task"}
    (result,) = _results(model.requests[2])
    assert "Saved entry warm-up-is-counted-in-steps-2026-11-26 as the draft" in result["content"]
    assert not result.get("is_error")
    # Every response's usage counts toward today's total, as the API reported it.
    assert done.tokens == 3040 + 4400 + 4512 == caps.used_today(project)
    # The moment waits until the user accepts the draft.
    assert [m.id for m in read_inbox(project)] == [moment.id]


def test_writing_the_journal_directly_is_redirected_or_refused(project):
    journal = project / "learning_journal.md"
    before = "# Learning Journal\n\n" + entry("An Older Entry")
    journal.write_text(before)
    os.symlink("learning_journal.md", project / "notes.md")
    os.link(journal, project / "copy.md")  # a hard link is the journal too
    added = entry()
    model = ScriptedModel(
        [
            reply(
                # Rewriting an entry that is there: refused.
                tool_use(
                    "Edit",
                    {
                        "file_path": "learning_journal.md",
                        "old_string": "An Older Entry",
                        "new_string": "A Rewritten Entry",
                    },
                ),
                # Through a symlink, replacing the whole journal: refused.
                tool_use("Write", {"file_path": "notes.md", "content": added}),
                # The user's code: refused.
                tool_use("Write", {"file_path": "train.py", "content": "gone\n"}),
                # Through a hard link, emptied: refused.
                tool_use("Write", {"file_path": "copy.md", "content": ""}),
                # The journal by its absolute path, kept and appended to: a draft.
                tool_use("Write", {"file_path": str(journal), "content": before + "\n" + added}),
            ),
            reply("Done."),
        ]
    )
    (done,) = _draft(project, model)

    assert journal.read_text() == before
    assert (project / "train.py").read_text().startswith("line 1\n")
    edit, symlinked, code, linked, appended = _results(model.requests[1])
    assert linked["is_error"] and "read-only" in linked["content"]
    assert (project / "copy.md").read_text() == before
    assert edit["is_error"] and "read-only" in edit["content"]
    assert symlinked["is_error"] and "read-only" in symlinked["content"]
    assert code["is_error"] and "nothing but entry drafts" in code["content"]
    assert not appended.get("is_error") and "as the draft" in appended["content"]
    (draft,) = list_drafts(project)
    assert done.drafts == [draft] and draft.text == added


def test_an_entry_that_fails_the_checks_is_not_saved(project):
    model = ScriptedModel(
        [
            reply(tool_use("JournalAppend", {"entry": entry(ref="train.py:999")})),
            reply(tool_use("JournalAppend", {"entry": entry()})),
            reply("Fixed and drafted."),
        ]
    )
    (done,) = _draft(project, model)
    (refused,) = _results(model.requests[1])
    assert refused["is_error"] and "NOT saved" in refused["content"]
    assert "train.py:999" in refused["content"]
    assert [d.text for d in list_drafts(project)] == [entry()] and len(done.drafts) == 1


def test_over_the_per_draft_cap_nothing_is_sent(project):
    settings(project, draft=True, draft_max_tokens=2000)
    model = ScriptedModel([reply("never")])
    (done,) = _draft(project, model)
    assert model.requests == []
    assert not done.ok and "was not started" in done.stopped and "nothing was sent" in done.stopped
    assert caps.used_today(project) == 0 and list_drafts(project) == []


def test_a_run_stops_before_the_request_that_would_pass_the_cap(project):
    settings(project, draft=True, draft_max_tokens=40_000)
    model = ScriptedModel(
        [
            # The API reports what it counted: more than the estimate left room for.
            reply(tool_use("Read", {"file_path": "train.py"}), usage=_usage(35_000, 100)),
            reply("never sent"),
        ]
    )
    (done,) = _draft(project, model)
    assert len(model.requests) == 1
    assert "stopped before its next request" in done.stopped
    assert done.tokens == 35_100 == caps.used_today(project)


def test_the_daily_cap_counts_every_draft_of_the_day(project):
    settings(project, draft=True, draft_daily_tokens=10_000)
    caps.add_usage(project, 10_000)
    model = ScriptedModel([reply("never")])
    with pytest.raises(UserError, match="today's drafting cap is used up"):
        _draft(project, model)
    assert model.requests == []
    stored = json.loads((project / ".journal" / "draft-usage.json").read_text())
    assert stored == {"days": {caps.today(): 10_000}}


def test_a_cap_that_is_not_a_number_is_a_sentence(project):
    settings(project, draft=True, draft_daily_tokens="lots")
    with pytest.raises(UserError, match=r'"capture.draft_daily_tokens" .* is "lots"'):
        _draft(project, ScriptedModel([]))


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


def test_drafts_folder_writes_are_drafts_and_its_parent_stays_out_of_reach(project):
    settings_file = project / ".journal" / "settings.json"
    settings_before = settings_file.read_text()
    journal = project / "learning_journal.md"
    journal.write_text("# Learning Journal\n\n" + entry("An Older Entry"))
    before = journal.read_text()
    model = ScriptedModel(
        [
            reply(
                # Out of drafts/ by `..`: our settings (the switch, the caps) are not writable.
                tool_use(
                    "Write",
                    {"file_path": ".journal/drafts/../settings.json", "content": "{}"},
                ),
                # An Edit that keeps the journal's last line and adds an entry after it: a draft.
                tool_use(
                    "Edit",
                    {
                        "file_path": "learning_journal.md",
                        "old_string": "#warmup #scheduler\n",
                        "new_string": "#warmup #scheduler\n\n" + entry(),
                    },
                ),
                # What the agent's own file calls a draft: checked and saved as one.
                tool_use(
                    "Write",
                    {"file_path": ".journal/drafts/zero.md", "content": entry("Second Entry")},
                ),
            ),
            reply("Done."),
        ]
    )
    (done,) = _draft(project, model)
    escape, edit, scratch = _results(model.requests[1])
    assert escape["is_error"] and settings_file.read_text() == settings_before
    assert not edit.get("is_error") and not scratch.get("is_error")
    assert journal.read_text() == before
    assert sorted(d.text for d in list_drafts(project)) == sorted([entry(), entry("Second Entry")])
    assert not (project / ".journal" / "drafts" / "zero.md").exists()  # saved by the entry's id
    assert len(done.drafts) == 2


def test_a_secret_never_reaches_a_draft(project):
    leaked = entry().replace("warm-up is in steps", "key sk-ant-api03-" + "A" * 93 + "AA")
    model = ScriptedModel([reply(tool_use("JournalAppend", {"entry": leaked})), reply("Done.")])
    (done,) = _draft(project, model)
    (refused,) = _results(model.requests[1])
    assert refused["is_error"] and "NOT saved" in refused["content"]
    assert "sk-ant-api03" not in refused["content"]
    assert list_drafts(project) == [] and not done.ok


def test_one_drafting_run_at_a_time(project):
    from journal_agent.locks import held

    model = ScriptedModel([reply("never")])
    busy = "another `journal-agent inbox draft` is running"
    lock = project / ".journal" / "locks" / "drafting.lock"
    with held(lock, 1, "busy"), pytest.raises(UserError, match=busy):
        _draft(project, model)
    assert model.requests == []


def test_the_dry_run_shows_the_very_request_a_draft_sends_first(project):
    moment = read_inbox(project)[0]
    (shown,) = preview(project, [moment], home=project.parent / "home")
    model = ScriptedModel([reply(tool_use("JournalAppend", {"entry": entry()})), reply("Done.")])
    _draft(project, model)
    sent = model.requests[0].body
    assert {k: shown["request"][k] for k in sent} == sent
    assert shown["fits"] and shown["need"] > shown["estimate"]["total"] > 1000
    assert shown["allowance"] == 100_000 and shown["moment"] == moment.id
