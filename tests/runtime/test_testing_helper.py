"""The public scripted-model helper, used exactly as docs/runtime.md shows (its example is
extracted from the docs and run, so the two cannot drift apart)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2

from journal_agent.testing import ScriptedModel, reply, thinking, tool_use

DOCS = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def _docs_example() -> str:
    """The python block of docs/runtime.md that defines test_my_agent_writes_the_note."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if "def test_my_agent_writes_the_note" in b]
    return block


def test_the_docs_example_runs_verbatim(tmp_path):
    namespace: dict = {}
    exec(compile(_docs_example(), str(DOCS), "exec"), namespace)  # the user's test file
    namespace["test_my_agent_writes_the_note"](tmp_path)
    assert (tmp_path / "n.md").read_text() == "hi\n"


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
