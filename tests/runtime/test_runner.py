"""Agent and command runs end to end: definitions, sub-agents in parallel, totals."""

from __future__ import annotations

import pytest

from journal_agent.errors import UserError
from journal_agent.runtime import RunOptions, run_agent, run_slash_command
from journal_agent.runtime.events import ToolCalled
from journal_agent.runtime.transcript import read_transcript
from journal_agent.testing import ScriptedModel, http_error, reply, tool_use
from tests.runtime.runtime_helpers import API_KEY, Rendezvous, WriteNote, write_agent, write_command
from tests.trust_helpers import approve


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _tools(parties: int = 2) -> dict:
    return {"WriteNote": WriteNote(), "Rendezvous": Rendezvous(parties)}


def test_two_subagents_run_in_parallel_and_return_their_final_messages(project, tmp_path):
    write_agent(project, "lead", "You are the lead.", tools="Task, WriteNote")
    write_agent(project, "writer-a", "You are writer A.", model="haiku")
    write_agent(project, "writer-b", "You are writer B.", tools="Rendezvous, WriteNote")
    ta = tool_use("Task", {"description": "a", "prompt": "write a", "subagent_type": "writer-a"})
    # Claude Code's newer name, with its extra fields (ignored) and a model choice (honoured)
    tb = tool_use(
        "Agent",
        {
            "description": "b",
            "prompt": "write b",
            "subagent_type": "writer-b",
            "run_in_background": False,
            "model": "opus",
        },
    )
    usage = {"input_tokens": 100, "output_tokens": 10}
    model = ScriptedModel(
        [reply(ta, tb, usage=usage), reply("Both writers finished.", usage=usage)],
        routes={
            "You are writer A.": [
                reply(
                    tool_use("Rendezvous", {"label": "A"}),
                    tool_use("WriteNote", {"path": "a.md", "text": "from A"}),
                    usage=usage,
                ),
                reply("A wrote a.md", usage=usage),
            ],
            "You are writer B.": [
                reply(
                    tool_use("Rendezvous", {"label": "B"}),
                    tool_use("WriteNote", {"path": "b.md", "text": "from B"}),
                    usage=usage,
                ),
                reply("B wrote b.md", usage=usage),
            ],
        },
    )
    events: list = []
    result = run_agent(
        "lead",
        "write both",
        root=project,
        client=model.client(api_key=API_KEY),
        tools=_tools(),
        home=tmp_path / "home",
        emit=events.append,
    )

    assert result.status == "completed" and result.final_text == "Both writers finished."
    assert (project / "a.md").read_text() == "from A\n"
    assert (project / "b.md").read_text() == "from B\n"
    # the Rendezvous calls of the two sub-agents met: they ran at the same time
    sub_results = [
        r.body["messages"][-1]["content"]
        for r in model.requests
        if "You are writer" in r.system_text and len(r.body["messages"]) == 3
    ]
    assert sorted(c[0]["content"] for c in sub_results) == ["A: met", "B: met"]
    # the lead got each sub-agent's final message, in the order of its Task calls
    lead_second = [r for r in model.requests if "You are the lead." in r.system_text][1]
    results = lead_second.body["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == [ta["id"], tb["id"]]
    assert [r["content"] for r in results] == ["A wrote a.md", "B wrote b.md"]
    # models: writer-a's file says haiku; writer-b would inherit, but its Task call says opus
    models = {r.system_text.split()[3]: r.body["model"] for r in model.requests}
    assert models["A."] == "claude-haiku-5-5" and models["lead."] == "claude-sonnet-5-5"
    assert models["B."] == "claude-opus-5-5"
    # tools: writer-a gets every tool except Task; writer-b only what it lists
    tools_of = {
        r.system_text.split()[3]: [t["name"] for t in r.body.get("tools", [])]
        for r in model.requests
    }
    assert tools_of["lead."] == ["WriteNote", "Task"]
    assert sorted(tools_of["A."]) == ["Rendezvous", "WriteNote"]
    assert tools_of["B."] == ["Rendezvous", "WriteNote"]
    # run totals include the sub-agents: 6 requests of 100 + 10 tokens
    assert result.usage.input == 600 and result.usage.output == 60
    # ... and are listed per request, tagged with the agent that made it
    assert len(result.per_turn) == 6 and sum(t["input"] for t in result.per_turn) == 600
    assert sorted(t["agent"] for t in result.per_turn)[:2] == ["main", "main"]
    assert result.files_changed == ["a.md", "b.md"]
    assert result.tools_used["Task"] == 2 and result.tools_used["WriteNote"] == 2
    agents = {e.agent for e in events if isinstance(e, ToolCalled)}
    assert agents == {"main", "main/writer-a#1", "main/writer-b#2"} or agents == {
        "main",
        "main/writer-a#2",
        "main/writer-b#1",
    }
    records = read_transcript(result.transcript_path)
    assert {r["agent"] for r in records} >= {"main"} | (agents - {"main"})
    assert API_KEY not in result.transcript_path.read_text()


def test_task_tool_description_lists_agents_and_unknown_type_is_an_error(project, tmp_path):
    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "helper", "You help.", description="Helps with things")
    bad = tool_use("Task", {"description": "x", "prompt": "y", "subagent_type": "nobody"})
    model = ScriptedModel([reply(bad), reply("ok")])
    run_agent("lead", "go", root=project, client=model.client(), tools={}, home=tmp_path / "home")
    task = model.requests[0].body["tools"][0]
    assert task["name"] == "Task" and "helper: Helps with things" in task["description"]
    assert set(task["input_schema"]["required"]) == {"description", "prompt"}
    (res,) = model.requests[1].body["messages"][-1]["content"]
    assert res["is_error"] is True and "Unknown subagent_type 'nobody'" in res["content"]


def test_agent_definition_shapes_the_request(project, tmp_path):
    write_agent(
        project,
        "reader",
        "You only read.",
        tools="WriteNote, Bash(git diff:*), Nope",
        disallowedTools="Rendezvous",
        model="opus",
        maxTurns="1",
    )
    model = ScriptedModel(
        [reply(tool_use("WriteNote", {"path": "n", "text": "t"})), reply("never")]
    )
    result = run_agent(
        "reader", "go", root=project, client=model.client(), tools=_tools(), home=tmp_path / "home"
    )
    body = model.requests[0].body
    assert body["model"] == "claude-opus-5-5"
    assert [t["name"] for t in body["tools"]] == ["WriteNote"]
    assert body["system"][0]["text"].startswith("You only read.")
    assert f"Workspace root: {project}" in body["system"][0]["text"]
    assert body["messages"][0]["content"][0]["text"] == "go"
    assert result.status == "max_turns" and len(model.requests) == 1  # maxTurns: 1


def test_model_flag_and_settings_aliases(project, tmp_path):
    write_agent(project, "a", "Body.", model="haiku")
    (project / ".journal").mkdir()
    (project / ".journal" / "settings.json").write_text('{"models": {"haiku": "my-haiku"}}')
    approve(project)
    model = ScriptedModel([reply("x"), reply("y")])
    r = run_agent("a", "go", root=project, client=model.client(), tools={}, home=tmp_path / "home")
    assert model.requests[0].body["model"] == "my-haiku"
    assert r.cost_usd is None  # no price known for my-haiku: cost unknown, not zero
    run_agent(
        "a",
        "go",
        root=project,
        client=model.client(),
        tools={},
        model="opus",
        home=tmp_path / "home",
    )
    assert model.requests[1].body["model"] == "claude-opus-5-5"


def test_command_text_is_the_first_message_under_the_general_prompt(project, tmp_path):
    write_command(
        project,
        "note",
        "Write a note about $ARGUMENTS into notes.md.",
        **{"allowed-tools": "WriteNote", "model": "haiku"},
    )
    model = ScriptedModel(
        [reply(tool_use("WriteNote", {"path": "notes.md", "text": "zero"})), reply("Noted.")]
    )
    r = run_slash_command(
        "note",
        "ZeRO stage 2",
        root=project,
        client=model.client(),
        tools=_tools(),
        home=tmp_path / "home",
    )
    body = model.requests[0].body
    assert body["messages"][0]["content"][0]["text"].startswith(
        "Write a note about ZeRO stage 2 into notes.md."
    )
    assert "journal-agent" in body["system"][0]["text"]
    assert body["model"] == "claude-haiku-5-5"
    assert [t["name"] for t in body["tools"]] == ["WriteNote"]
    assert r.files_changed == ["notes.md"] and r.ok


def test_missing_agent_is_a_user_error(project, tmp_path):
    with pytest.raises(UserError):
        run_agent(
            "ghost",
            "go",
            root=project,
            client=ScriptedModel().client(),
            tools={},
            home=tmp_path / "home",
        )


def test_budget_is_shared_with_subagents(project, tmp_path):
    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "sub", "You are sub.")
    big = {"input_tokens": 5000, "output_tokens": 0}
    t = tool_use("Task", {"description": "s", "prompt": "p", "subagent_type": "sub"})
    model = ScriptedModel(
        [reply(t, usage=big), reply("lead done", usage=big)],
        routes={
            "You are sub.": [reply(tool_use("WriteNote", {"path": "x", "text": "y"}), usage=big)]
            * 5
        },
    )
    r = run_agent(
        "lead",
        "go",
        root=project,
        client=model.client(),
        tools=_tools(),
        home=tmp_path / "home",
        options=RunOptions(budget_tokens=12_000),
    )
    assert r.status == "budget"
    assert r.usage.total < 12_000 + 5000  # one request may cross the line, not more


def test_prices_from_settings_price_a_custom_model(project, tmp_path):
    write_agent(project, "a", "Body.")
    (project / ".journal").mkdir()
    (project / ".journal" / "settings.json").write_text(
        '{"prices": {"gw-model": {"input": 1, "output": 5, "cache_write": 1.25, '
        '"cache_read": 0.1}}}'
    )
    approve(project)
    usage = {"input_tokens": 1000, "output_tokens": 1000, "cache_read_input_tokens": 10000}
    model = ScriptedModel([reply("x", usage=usage)])
    r = run_agent(
        "a",
        "go",
        root=project,
        client=model.client(),
        tools={},
        home=tmp_path / "home",
        model="gw-model",
    )
    assert model.requests[0].body["model"] == "gw-model"
    assert r.cost_usd == pytest.approx((1000 * 1 + 1000 * 5 + 10000 * 0.1) / 1e6)


def test_tool_lists_accept_claude_code_mcp_names_and_report_missing_tools(project, tmp_path):
    write_agent(project, "m", "Body.", tools="mcp__journal-agent__WriteNote, Agent, Nope")
    model = ScriptedModel([reply("ok")])
    events: list = []
    run_agent(
        "m",
        "go",
        root=project,
        client=model.client(),
        tools=_tools(),
        home=tmp_path / "home",
        emit=events.append,
    )
    assert [t["name"] for t in model.requests[0].body["tools"]] == ["WriteNote", "Task"]
    notices = [e.message for e in events if type(e).__name__ == "Notice"]
    assert notices == ["tool 'Nope' is not available here; skipped"]


def test_a_commands_allowed_tools_run_without_asking(project, tmp_path):
    write_command(project, "jot", "Write $ARGUMENTS to jot.md.", **{"allowed-tools": "Write"})
    write_agent(project, "plain", "Body.", tools="Write")
    script = [reply(tool_use("Write", {"file_path": "jot.md", "content": "hi\n"})), reply("ok")]
    # A project file's grants count once approved (docs/definitions.md); before, they ask.
    model = ScriptedModel(list(script))
    run_slash_command("jot", "hi", root=project, client=model.client(), home=tmp_path / "home")
    assert not (project / "jot.md").exists()
    approve(project, ".claude/commands/jot.md")
    model = ScriptedModel(list(script))
    r = run_slash_command("jot", "hi", root=project, client=model.client(), home=tmp_path / "home")
    assert (project / "jot.md").read_text() == "hi\n" and r.files_changed == ["jot.md"]
    # the same call from an agent in the default mode, with nobody to ask: denied
    (project / "jot.md").unlink()
    model = ScriptedModel(list(script))
    run_agent("plain", "go", root=project, client=model.client(), home=tmp_path / "home")
    assert not (project / "jot.md").exists()
    assert model.requests[1].body["messages"][-1]["content"][0]["is_error"] is True


def test_a_failing_model_call_in_one_subagent_stops_the_others(project, tmp_path):
    import threading
    import time

    from journal_agent.runtime.client import ModelCallError
    from journal_agent.runtime.events import Done

    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "good", "You are good.")
    write_agent(project, "bad", "You are bad.")
    bad_failed = threading.Event()

    def after_bad_failed(body):
        bad_failed.wait(10)  # the good sub-agent's first answer comes after the 401 ...
        time.sleep(1.0)  # ... has surfaced as an exception in the bad one (generous margin)
        return reply(tool_use("WriteNote", {"path": "g.md", "text": "x"}))

    calls = [
        tool_use("Task", {"description": d, "prompt": "p", "subagent_type": d})
        for d in ("good", "bad")
    ]

    def bad(body):
        bad_failed.set()
        return http_error(401)

    model = ScriptedModel(
        [reply(*calls)],
        routes={"You are good.": [after_bad_failed, reply("never")], "You are bad.": [bad]},
    )
    events: list = []
    with pytest.raises(ModelCallError) as info:
        run_agent(
            "lead",
            "go",
            root=project,
            client=model.client(max_retries=0),
            tools=_tools(),
            home=tmp_path / "home",
            emit=events.append,
        )
    assert info.value.exit_code == 2  # raised at once, without waiting for the good one

    def good_done() -> list:
        return [e for e in events if isinstance(e, Done) and "/good#" in e.agent]

    deadline = time.monotonic() + 30  # the good sub-agent winds down on its own thread
    while not good_done() and time.monotonic() < deadline:
        time.sleep(0.05)
    (done,) = good_done()
    assert done.result.status == "interrupted"
    # it may have sent its first request before the failure; it never sent another
    good_requests = [r for r in model.requests if "You are good." in r.system_text]
    assert len(good_requests) <= 1


def test_a_subagent_that_stops_early_or_breaks_is_an_error_result_the_lead_can_use(
    project, tmp_path
):
    from journal_agent.testing import text

    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "short", "You are short.", maxTurns="1", tools="WriteNote")
    write_agent(project, "broken", "You are broken.", tools="WriteNote")
    calls = [
        tool_use("Task", {"description": "s", "prompt": "p", "subagent_type": "short"}),
        tool_use("Task", {"description": "b", "prompt": "p", "subagent_type": "broken"}),
    ]
    model = ScriptedModel(
        [reply(*calls), reply("One failed, one ran out of turns; I will report that.")],
        routes={
            # wants a second turn it does not get
            "You are short.": [reply(text("Half done."), tool_use("WriteNote", {"path": "s"}))],
            "You are broken.": [reply("I refuse.", stop_reason="refusal")],
        },
    )
    result = run_agent(
        "lead", "go", root=project, client=model.client(), tools=_tools(), home=tmp_path / "home"
    )
    assert result.ok and result.final_text.startswith("One failed")
    short, broken = model.requests[-1].body["messages"][-1]["content"]
    assert short["is_error"] is True and short["content"].startswith("Half done.")
    assert "the agent stopped early: stopped after 1 turns" in short["content"]
    assert broken["is_error"] is True and "refusal" in broken["content"]


def test_parallel_subagents_editing_one_file_lose_no_edit(project, tmp_path):
    """Both read the file, both edit it at once: one edit lands, the other is told the file
    changed since it read it, reads again and lands too (Claude Code would lose one)."""
    from journal_agent.tools.registry import builtin_tools

    (project / "notes.md").write_text("alpha\nbeta\n")
    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "editor", "You are the editor.", tools="Read, Edit, Rendezvous")
    rendezvous = Rendezvous(2)  # both have read the file before either edits

    def editor(body):  # both editors' script: read, meet, edit; on a conflict read again
        messages = body["messages"]
        prompt = messages[0]["content"]
        old, new = (prompt if isinstance(prompt, str) else prompt[0]["text"]).split()
        if len(messages) == 1:
            return reply(tool_use("Read", {"file_path": "notes.md"}))
        if len(messages) == 3:  # it has read the file: wait until the other one has too
            return reply(tool_use("Rendezvous", {"label": old}))
        called = [b["name"] for b in messages[-2]["content"] if b.get("type") == "tool_use"]
        result = messages[-1]["content"][0]
        if called == ["Edit"] and not result.get("is_error"):
            return reply(f"{old} → {new} done")
        if called == ["Edit"]:  # "modified since read": read it again
            assert "since" in result["content"], result["content"]
            return reply(tool_use("Read", {"file_path": "notes.md"}))
        edit = {"file_path": "notes.md", "old_string": old, "new_string": new}
        return reply(tool_use("Edit", edit))

    calls = [
        tool_use("Task", {"description": d, "prompt": d, "subagent_type": "editor"})
        for d in ("alpha ALPHA", "beta BETA")
    ]
    model = ScriptedModel([reply(*calls), reply("both done")], routes={"editor": [editor] * 12})
    result = run_agent(
        "lead",
        "go",
        root=project,
        client=model.client(),
        tools={**builtin_tools(), "Rendezvous": rendezvous},
        mode="bypassPermissions",
        home=tmp_path / "home",
    )
    assert result.ok
    assert (project / "notes.md").read_text() == "ALPHA\nBETA\n"
    task_results = model.requests[-1].body["messages"][-1]["content"]
    assert [r["content"] for r in task_results] == ["alpha → ALPHA done", "beta → BETA done"]
    # the editor that came second was refused once, read again and edited again
    assert result.tools_used["Edit"] == 3 and result.tools_used["Read"] == 3


def test_all_tools_minus_disallowed_and_inherit_takes_the_settings_model(project, tmp_path):
    from datetime import date

    from journal_agent.tools.registry import builtin_tools

    write_agent(project, "a", "Body.", disallowedTools="Write, Bash, Task", model="inherit")
    (project / ".journal").mkdir()
    (project / ".journal" / "settings.json").write_text('{"model": "haiku"}')
    approve(project)
    model = ScriptedModel([reply("ok")])
    run_agent("a", "go", root=project, client=model.client(), home=tmp_path / "home")
    body = model.requests[0].body
    expected = [n for n in builtin_tools() if n not in ("Write", "Bash")]
    assert [t["name"] for t in body["tools"]] == expected  # and no Task
    assert body["model"] == "claude-haiku-5-5"
    system = body["system"][0]["text"]
    assert system.startswith("Body.\n\n<env>")
    assert f"Today's date: {date.today().isoformat()}" in system and "Platform: " in system
