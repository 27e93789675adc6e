"""Whole conversations through the real SDK over a scripted transport."""

from __future__ import annotations

import json

import pytest

from journal_agent.runtime.caching import MAX_BREAKPOINTS, count_breakpoints
from journal_agent.runtime.client import ModelCallError, make_client
from journal_agent.runtime.events import Done, ToolCalled, ToolFinished, UsageReported
from journal_agent.runtime.loop import CONTINUE_PROMPT, RunOptions
from journal_agent.runtime.transcript import read_transcript, replay_requests
from journal_agent.testing import ScriptedModel, http_error, reply, thinking, tool_use
from tests.runtime.runtime_helpers import API_KEY, Fail, Rendezvous, WriteNote, make_loop


def test_parallel_tool_calls_run_concurrently_and_return_in_one_message(tmp_path):
    a = tool_use("Rendezvous", {"label": "a"})
    b = tool_use("Rendezvous", {"label": "b"})
    c = tool_use("WriteNote", {"path": "notes.md", "text": "hello"})
    model = ScriptedModel([reply("Working on it.", a, b, c), reply("All done.")])
    events: list = []
    result = make_loop(model, tmp_path, [Rendezvous(2), WriteNote()], events=events).run("go")

    assert result.status == "completed" and result.final_text == "All done."
    assert (tmp_path / "notes.md").read_text() == "hello\n"
    second = model.requests[1].body["messages"]
    # user, assistant (verbatim), ONE user message holding every result in tool_use order
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    results = second[2]["content"]
    assert [r["type"] for r in results] == ["tool_result"] * 3
    assert [r["tool_use_id"] for r in results] == [a["id"], b["id"], c["id"]]
    assert results[0]["content"] == "a: met" and results[1]["content"] == "b: met"
    assert not any(r.get("is_error") for r in results)
    assert result.tools_used == {"Rendezvous": 2, "WriteNote": 1}
    assert sum(isinstance(e, ToolCalled) for e in events) == 3
    assert sum(isinstance(e, ToolFinished) for e in events) == 3
    assert isinstance(events[-1], Done)


def test_failures_become_error_results_and_the_loop_goes_on(tmp_path):
    calls = [
        tool_use("Fail", {"how": "tool_error"}),
        tool_use("Fail", {"how": "crash"}),
        tool_use("WriteNote", {"path": "x.md"}),  # missing "text"
        tool_use("WriteNote", {"path": "x.md", "text": 3}),  # wrong type
        tool_use("Nonexistent", {}),
        tool_use("Agent", {"description": "d", "prompt": "p"}),  # alias of an absent Task
    ]
    model = ScriptedModel([reply(*calls), reply("I see the errors.")])
    result = make_loop(model, tmp_path, [Fail(), WriteNote()]).run("go")

    assert result.status == "completed"
    results = model.requests[1].body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]
    assert all(r["is_error"] is True for r in results)
    assert results[0]["content"] == "no such thing"
    assert "RuntimeError: disk on fire" in results[1]["content"]
    assert (
        "Invalid input for WriteNote" in results[2]["content"] and "text" in results[2]["content"]
    )
    assert "Invalid input for WriteNote" in results[3]["content"]
    assert "Unknown tool 'Nonexistent'" in results[4]["content"]
    assert "Available tools: Fail, WriteNote" in results[4]["content"]
    assert not (tmp_path / "x.md").exists()


def test_truncated_tool_use_is_never_executed_and_the_turn_is_retried(tmp_path):
    truncated = reply(
        "Writing", tool_use("WriteNote", {"path": "cut.md"}), stop_reason="max_tokens"
    )
    model = ScriptedModel(
        [
            truncated,
            reply(tool_use("WriteNote", {"path": "ok.md", "text": "full"})),
            reply("done"),
        ]
    )
    result = make_loop(model, tmp_path, [WriteNote()], options=RunOptions(max_tokens=1000)).run(
        "go"
    )

    assert result.status == "completed"
    assert not (tmp_path / "cut.md").exists()
    assert (tmp_path / "ok.md").read_text() == "full\n"
    first, retry = model.requests[0].body, model.requests[1].body
    assert retry["messages"] == first["messages"]  # the truncated answer was not appended
    assert (first["max_tokens"], retry["max_tokens"]) == (1000, 2000)


def test_truncated_tool_use_at_the_ceiling_stops_with_a_reason(tmp_path):
    cut = reply(tool_use("WriteNote", {"path": "cut.md"}), stop_reason="max_tokens")
    model = ScriptedModel([cut, cut])
    opts = RunOptions(max_tokens=1000, max_tokens_ceiling=2000)
    result = make_loop(model, tmp_path, [WriteNote()], options=opts).run("go")
    assert result.status == "max_tokens" and result.exit_code == 3
    assert "cut off" in result.message
    assert not (tmp_path / "cut.md").exists()


def test_truncated_prose_is_kept_and_continued(tmp_path):
    model = ScriptedModel(
        [reply("The first half", stop_reason="max_tokens"), reply("second half.")]
    )
    result = make_loop(model, tmp_path).run("go")
    assert result.status == "completed"
    msgs = model.requests[1].body["messages"]
    assert msgs[1]["content"][0]["text"] == "The first half"
    assert msgs[2]["content"][0]["text"] == CONTINUE_PROMPT


def test_pause_turn_resumes_with_the_paused_content(tmp_path):
    paused = reply(thinking("let me search", "sig-1"), "Searching…", stop_reason="pause_turn")
    model = ScriptedModel([paused, reply("Found it.")])
    result = make_loop(model, tmp_path).run("go")
    assert result.status == "completed" and result.final_text == "Found it."
    msgs = model.requests[1].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["content"][0] == paused["content"][0]  # thinking verbatim
    assert msgs[1]["content"][1]["text"] == "Searching…"


def test_thinking_blocks_go_back_verbatim_with_signatures(tmp_path):
    think = thinking("I should write the note first.", "EqQBCkYIBRgCKkD+sig/==")
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    call = tool_use("WriteNote", {"path": "n.md", "text": "t"})
    model = ScriptedModel([reply(think, redacted, call), reply("ok")])
    make_loop(model, tmp_path, [WriteNote()]).run("go")
    assistant = model.requests[1].body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == think
    assert assistant["content"][1] == redacted
    assert assistant["content"][2] == call


def test_cache_breakpoints_on_last_tool_system_and_rolling_messages(tmp_path):
    c1 = tool_use("WriteNote", {"path": "a.md", "text": "1"})
    c2 = tool_use("WriteNote", {"path": "a.md", "text": "2"})
    model = ScriptedModel([reply(c1), reply(c2), reply("done")])
    make_loop(model, tmp_path, [Fail(), WriteNote()]).run("go")

    def marked(req):
        out = [("tool", t["name"]) for t in req.get("tools", []) if "cache_control" in t]
        out += [("system", 0) for b in req["system"] if "cache_control" in b]
        for i, m in enumerate(req["messages"]):
            if isinstance(m["content"], list):
                out += [("message", i) for b in m["content"] if "cache_control" in b]
        return out

    bodies = [r.body for r in model.requests]
    assert marked(bodies[0]) == [("tool", "WriteNote"), ("system", 0), ("message", 0)]
    # from the second request on: where the previous request ended, and the newest message
    assert marked(bodies[1]) == [
        ("tool", "WriteNote"),
        ("system", 0),
        ("message", 0),
        ("message", 2),
    ]
    assert marked(bodies[2]) == [
        ("tool", "WriteNote"),
        ("system", 0),
        ("message", 2),
        ("message", 4),
    ]
    assert bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}
    ]
    # the breakpoint sits on the last tool_result block of the newest message
    assert bodies[2]["messages"][4]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all(count_breakpoints(b) <= MAX_BREAKPOINTS for b in bodies)
    # ... and the history itself is never modified: the earlier request had no mark on it
    assert "cache_control" not in bodies[1]["messages"][1]["content"][-1]


def test_overloaded_529_is_retried_then_succeeds(tmp_path):
    model = ScriptedModel([http_error(529, "Overloaded"), reply("fine")])
    result = make_loop(model, tmp_path).run("go")
    assert result.status == "completed" and result.final_text == "fine"
    assert len(model.requests) == 2
    assert model.requests[1].headers["x-stainless-retry-count"] == "1"


def test_401_is_one_sentence_and_exit_code_2(tmp_path):
    model = ScriptedModel([http_error(401, "invalid x-api-key")])
    with pytest.raises(ModelCallError) as info:
        make_loop(model, tmp_path).run("go")
    assert info.value.exit_code == 2
    assert "ANTHROPIC_API_KEY" in info.value.message
    assert len(model.requests) == 1  # not retried


def test_retries_exhausted_is_a_clear_error(tmp_path):
    model = ScriptedModel([http_error(529)] * 3)
    with pytest.raises(ModelCallError) as info:
        make_loop(model, tmp_path).run("go")
    assert "529" in info.value.message and info.value.exit_code == 1


def test_missing_api_key_is_exit_code_2():
    with pytest.raises(Exception) as info:
        make_client()
    assert getattr(info.value, "exit_code", None) == 2
    assert "ANTHROPIC_API_KEY is not set" in str(info.value)


def test_base_url_from_environment_is_honoured(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/gateway")
    assert str(make_client().base_url).startswith("http://127.0.0.1:9/gateway")


@pytest.mark.parametrize(
    ("stop", "status"),
    [
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "context_window"),
        ("something_new", "unknown_stop"),
    ],
)
def test_stopping_reasons_end_cleanly(tmp_path, stop, status):
    body = reply("partial")
    body["stop_reason"] = stop
    # an unknown stop reason is not valid for the strict client; use a lenient callable
    model = ScriptedModel([body])
    loop = make_loop(model, tmp_path)
    if stop == "something_new":
        import anthropic
        import httpx2

        loop.session.client = anthropic.Anthropic(
            api_key="k",
            base_url="http://x.invalid",
            http_client=httpx2.Client(transport=httpx2.MockTransport(model.handler)),
        )
    result = loop.run("go")
    assert result.status == status and result.exit_code == 1 and result.message


def test_turn_limit_stops_cleanly(tmp_path):
    loop_forever = [reply(tool_use("WriteNote", {"path": "a", "text": "x"})) for _ in range(5)]
    model = ScriptedModel(loop_forever)
    result = make_loop(model, tmp_path, [WriteNote()], options=RunOptions(max_turns=2)).run("go")
    assert result.status == "max_turns" and result.turns == 2 and result.exit_code == 3
    assert len(model.requests) == 2


def test_token_and_cost_budgets_stop_cleanly(tmp_path):
    usage = {"input_tokens": 1000, "output_tokens": 500}
    script = [
        reply(tool_use("WriteNote", {"path": "a", "text": "x"}), usage=usage) for _ in range(5)
    ]
    model = ScriptedModel(list(script))
    r = make_loop(model, tmp_path, [WriteNote()], options=RunOptions(budget_tokens=2500)).run("go")
    assert r.status == "budget" and r.turns == 2 and "token budget" in r.message
    model = ScriptedModel(list(script))
    # sonnet: 1000 * $2/M + 500 * $10/M = $0.007 per turn
    r = make_loop(model, tmp_path, [WriteNote()], options=RunOptions(budget_usd=0.01)).run("go")
    assert r.status == "budget" and r.turns == 2
    assert r.cost_usd == pytest.approx(0.014)


def test_usage_and_cost_include_cache_tokens(tmp_path):
    usage = {
        "input_tokens": 100,
        "output_tokens": 200,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 10_000,
    }
    model = ScriptedModel([reply("hi", usage=usage)])
    events: list = []
    r = make_loop(model, tmp_path, events=events).run("go")
    assert r.usage.as_dict() == {
        "input": 100,
        "output": 200,
        "cache_write": 1000,
        "cache_read": 10_000,
    }
    # 100*2 + 200*10 + 1000*2.5 + 10000*0.2 = 6700 per million
    assert r.cost_usd == pytest.approx(0.0067)
    (u,) = [e for e in events if isinstance(e, UsageReported)]
    assert u.run_cost_usd == pytest.approx(0.0067)


def test_question_on_a_terminal_continues_the_conversation(tmp_path):
    model = ScriptedModel([reply("What should I record?"), reply("Recorded ZeRO.")])
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return "ZeRO stage 2"

    r = make_loop(model, tmp_path, ask=ask).run("go")
    assert asked == ["What should I record?"]
    assert r.final_text == "Recorded ZeRO."
    assert model.requests[1].body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "ZeRO stage 2", "cache_control": {"type": "ephemeral"}}
        ],
    }


def test_without_ask_a_question_ends_the_run(tmp_path):
    model = ScriptedModel([reply("What should I record?")])
    r = make_loop(model, tmp_path).run("go")
    assert r.status == "completed" and len(model.requests) == 1


def test_transcript_has_every_request_and_never_the_key(tmp_path):
    model = ScriptedModel(
        [reply(tool_use("WriteNote", {"path": "a", "text": API_KEY})), reply(f"I wrote {API_KEY}")]
    )
    loop = make_loop(model, tmp_path, [WriteNote()])
    loop.run("remember sk-ant-api03-another-secret-value-123")
    loop.session.transcript.close()
    raw = (tmp_path / "t.jsonl").read_text()
    assert API_KEY not in raw and "another-secret-value" not in raw
    assert model.requests[0].headers["authorization"].endswith(API_KEY)  # it was really sent
    records = [json.loads(line) for line in raw.splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds.count("request") == 2 and kinds.count("response") == 2
    assert {"run_start", "tool_call", "tool_result", "usage", "done"} <= set(kinds)
    req = next(r for r in records if r["type"] == "request")
    assert req["model"] == "claude-sonnet-5-5" and req["system"]


def test_transcript_replays_the_exact_requests_sent(tmp_path):
    think = thinking("plan", "sig")
    model = ScriptedModel(
        [
            reply(think, tool_use("WriteNote", {"path": "a", "text": "1"}), tool_use("Fail", {})),
            reply("cut", stop_reason="max_tokens"),
            reply(tool_use("WriteNote", {"path": "a", "text": "2"})),
            reply("done"),
        ]
    )
    loop = make_loop(model, tmp_path, [WriteNote(), Fail()])
    loop.run("go")
    loop.session.transcript.close()
    records = read_transcript(tmp_path / "t.jsonl")
    assert replay_requests(records) == [r.body for r in model.requests]
    # the transcript grows linearly: each request record holds only the new messages
    deltas = [len(r["new_messages"]) for r in records if r["type"] == "request"]
    assert deltas == [1, 2, 2, 2]


def test_large_max_tokens_needs_no_streaming_thanks_to_the_explicit_timeout(tmp_path):
    # Without an explicit timeout the SDK refuses non-streaming requests above ~21k tokens.
    model = ScriptedModel([reply("long answer")])
    r = make_loop(model, tmp_path, options=RunOptions(max_tokens=64_000)).run("go")
    assert r.ok and model.requests[0].body["max_tokens"] == 64_000
    assert model.requests[0].headers["x-stainless-read-timeout"] == "600.0"
