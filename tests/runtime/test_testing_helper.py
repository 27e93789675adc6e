"""The public scripted-model helper, used exactly as docs/runtime.md shows."""

from __future__ import annotations

import httpx2

from journal_agent.runtime import run_agent
from journal_agent.testing import ScriptedModel, http_error, reply, thinking, tool_use


def test_my_agent_writes_the_note(tmp_path):  # the docs example, verbatim
    (tmp_path / ".claude/agents").mkdir(parents=True)
    (tmp_path / ".claude/agents/scribe.md").write_text(
        "---\nname: scribe\ndescription: writes notes\ntools: Write\n---\nYou are the scribe.\n"
    )
    model = ScriptedModel(
        [
            http_error(529),  # overloaded: the SDK retries
            reply("Writing.", tool_use("Write", {"file_path": "n.md", "content": "hi\n"})),
            reply("Done."),
        ]
    )
    result = run_agent(
        "scribe",
        "write n.md",
        root=tmp_path,
        client=model.client(),
        mode="acceptEdits",
        home=tmp_path / "home",
    )

    assert result.final_text == "Done." and (tmp_path / "n.md").read_text() == "hi\n"
    second = model.requests[2].body  # exact JSON sent
    assert second["system"][0]["text"].startswith("You are the scribe.")
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


def test_streaming_requests_get_server_sent_events():
    think = thinking("hmm", "sig-abc")
    call = tool_use("Read", {"file_path": "a.md"})
    model = ScriptedModel(
        [reply(think, "Reading.", call, usage={"input_tokens": 7, "output_tokens": 3})]
    )
    client = model.client()
    with client.messages.stream(
        model="claude-haiku-5-5", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = stream.get_final_message()
    assert [b.to_dict() for b in message.content] == [
        think,
        {"type": "text", "text": "Reading."},
        call,
    ]
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 3
    assert model.requests[0].body["stream"] is True


def test_an_exhausted_script_fails_loudly_and_a_callable_sees_the_body():
    seen = []
    model = ScriptedModel([lambda body: seen.append(body["model"]) or reply("ok")])
    client = model.client(max_retries=0)
    client.messages.create(model="m1", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert seen == ["m1"] and model.remaining == 0
    try:
        client.messages.create(
            model="m1", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    except Exception as exc:
        assert "no response left" in str(exc)
    else:
        raise AssertionError("an exhausted script must fail")


def test_served_over_http_for_subprocesses():
    model = ScriptedModel([reply("hello")])
    with model.serve() as url:
        response = httpx2.post(f"{url}/v1/messages", json={"model": "m", "messages": []})
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "hello"
    assert model.requests[0].path == "/v1/messages"
