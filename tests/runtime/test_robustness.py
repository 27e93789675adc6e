"""Edge cases a real conversation runs into: dependent calls in one turn, odd tool output,
secrets in what tools read, budgets written oddly, tool calls under an unexpected stop reason."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pydantic import BaseModel

from journal_agent.errors import UserError
from journal_agent.runtime import RunOptions, run_agent
from journal_agent.runtime.limits import parse_budget
from journal_agent.testing import ScriptedModel, reply, tool_use
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from tests.runtime.runtime_helpers import API_KEY, WriteNote, make_loop, write_agent


class _Empty(BaseModel):
    pass


class Exclusive(Tool):
    """Fails if another call of this tool is in flight: proof that calls ran one at a time."""

    name = "Exclusive"
    description = "Change shared state."
    Input = _Empty

    def __init__(self) -> None:
        self.inflight = 0
        self.lock = threading.Lock()

    def run(self, ctx: ToolContext, params: BaseModel) -> ToolResult:
        with self.lock:
            self.inflight += 1
            overlapping = self.inflight > 1
        time.sleep(0.05)  # long enough for a concurrent call to overlap
        with self.lock:
            self.inflight -= 1
        if overlapping:
            raise ToolError("ran at the same time as another call")
        return ToolResult("alone")


def test_dependent_calls_of_one_turn_run_in_the_models_order(tmp_path):
    (tmp_path / ".claude/agents").mkdir(parents=True)
    write_agent(tmp_path, "dev", "You write code.", tools="Write, Edit, Bash, Read")
    model = ScriptedModel(
        [
            reply(
                "Write, then edit, then run.",
                tool_use("Write", {"file_path": "f.md", "content": "alpha\n"}),
                tool_use("Edit", {"file_path": "f.md", "old_string": "alpha", "new_string": "b"}),
                tool_use("Write", {"file_path": "s.sh", "content": "cat f.md > out.txt\n"}),
                tool_use("Bash", {"command": "sh s.sh"}),
            ),
            reply("done"),
        ]
    )
    run_agent(
        "dev",
        "go",
        root=tmp_path,
        client=model.client(),
        mode="bypassPermissions",
        home=tmp_path / "home",
    )
    results = model.requests[1].body["messages"][-1]["content"]
    assert [r.get("is_error", False) for r in results] == [False] * 4, results
    assert (tmp_path / "f.md").read_text() == "b\n"
    assert (tmp_path / "out.txt").read_text() == "b\n"  # the script saw the edited file


def test_tools_that_change_state_never_overlap_but_their_results_keep_the_order(tmp_path):
    exclusive = Exclusive()
    calls = [tool_use("Exclusive", {}) for _ in range(4)]
    model = ScriptedModel([reply(*calls), reply("ok")])
    make_loop(model, tmp_path, [exclusive]).run("go")
    results = model.requests[1].body["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]
    assert [r["content"] for r in results] == ["alone"] * 4


class _Raw(Tool):
    name = "Raw"
    description = "Prints bytes that are not UTF-8."
    Input = _Empty

    def run(self, ctx: ToolContext, params: BaseModel) -> ToolResult:
        return ToolResult(b"caf\xe9 \xff ok".decode("utf-8", "surrogateescape"))


def test_tool_output_that_is_not_unicode_is_sent_and_logged_with_replacement_characters(
    tmp_path,
):
    model = ScriptedModel([reply(tool_use("Raw", {})), reply("seen")])
    loop = make_loop(model, tmp_path, [_Raw()])
    result = loop.run("go")
    loop.session.transcript.close()
    assert result.ok
    (sent,) = model.requests[1].body["messages"][-1]["content"]
    assert sent["content"] == "caf\ufffd \ufffd ok" and not sent.get("is_error")
    logged = [
        json.loads(line) for line in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert any(r.get("content") == "caf\ufffd \ufffd ok" for r in logged)


def test_secrets_a_tool_reads_never_reach_the_transcript(tmp_path, monkeypatch):
    hf = "hf_" + "Q" * 30
    monkeypatch.setenv("HF_TOKEN", hf)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    write_agent(tmp_path, "reader", "You read.", tools="Read")
    # (.env itself is not readable by default; a setup script is)
    (tmp_path / "setup.sh").write_text(
        f"export ANTHROPIC_API_KEY={API_KEY}\nexport HF_TOKEN={hf}\n"
        "DB_PASSWORD=hunter2hunter2\nDEBUG=1\n"
    )
    model = ScriptedModel(
        [
            reply(tool_use("Read", {"file_path": "setup.sh"})),
            # (the keys come from the environment too; the password it was only shown redacted)
            reply(f"Found {API_KEY}, {hf} and a [REDACTED] password there."),
        ]
    )
    result = run_agent(
        "reader",
        "what does setup.sh set?",
        root=tmp_path,
        client=model.client(api_key=API_KEY),
        mode="bypassPermissions",
        home=tmp_path / "home",
    )
    # the model got the file with its secrets redacted (#29: tool results are, before they
    # reach the model) ...
    sent = model.requests[1].body["messages"][-1]["content"][0]["content"]
    assert hf not in sent and "export HF_TOKEN=[REDACTED]" in sent and "DEBUG=1" in sent
    # ... and the transcript keeps none of the secrets, only that they were there
    raw = result.transcript_path.read_text(encoding="utf-8")
    for secret in (API_KEY, hf, "hunter2hunter2"):
        assert secret not in raw
    assert "export HF_TOKEN=[REDACTED]" in raw and "DEBUG=1" in raw


def test_a_tool_call_under_end_turn_still_gets_its_result(tmp_path):
    odd = reply(tool_use("WriteNote", {"path": "n.md", "text": "x"}), stop_reason="end_turn")
    model = ScriptedModel([odd, reply("done")])
    result = make_loop(model, tmp_path, [WriteNote()]).run("go")
    assert result.final_text == "done" and (tmp_path / "n.md").read_text() == "x\n"
    assert model.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["0.50"], (0.5, None)),
        (["$2"], (2.0, None)),
        (["200k"], (None, 200_000)),
        (["1.5M"], (None, 1_500_000)),
        (["0.5,200k"], (0.5, 200_000)),
        (["0.5", "150000tok"], (0.5, 150_000)),
    ],
)
def test_budget_values(values, expected):
    assert parse_budget(values) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [("1,000", "two costs"), ("200k,300k", "two token counts"), ("0", "zero"), ("abc", "neither")],
)
def test_budget_values_that_would_mislead_are_errors(value, says):
    with pytest.raises(UserError) as info:
        parse_budget([value])
    assert says in info.value.message


def test_a_cost_budget_for_a_model_without_a_price_is_refused(tmp_path):
    write_agent(tmp_path, "a", "Body.")
    model = ScriptedModel([reply("x")])
    with pytest.raises(UserError) as info:
        run_agent(
            "a",
            "go",
            root=tmp_path,
            client=model.client(),
            tools={},
            model="my-gateway-model",
            home=tmp_path / "home",
            options=RunOptions(budget_usd=0.5),
        )
    assert "no" in info.value.message and "my-gateway-model" in info.value.message
    assert not model.requests  # refused before spending anything


def test_a_prompt_with_undecodable_bytes_is_sent_not_a_crash(tmp_path):
    # What Python makes of `journal-agent run scribe $'caf\xe9'` in a UTF-8 locale.
    prompt = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")
    model = ScriptedModel([reply("What should I record?"), reply("ok")])
    result = make_loop(model, tmp_path, ask=lambda q: "le caf\udce9").run(prompt)
    assert result.ok
    sent = model.requests[1].body["messages"]
    assert sent[0]["content"][0]["text"] == "caf\ufffd au lait"
    assert sent[2]["content"][0]["text"] == "le caf\ufffd"  # the terminal reply too


@pytest.mark.parametrize(
    "line",
    [
        "MAX_NEW_TOKENS=2048",
        "request(max_tokens=64000)",
        'API_KEY = os.environ["ANTHROPIC_API_KEY"]',
        "TOKEN=${HF_TOKEN}",
        "the token budget is 200k",
    ],
)
def test_the_scrubber_leaves_code_and_settings_alone(line):
    from journal_agent.runtime.transcript import Scrubber

    assert Scrubber().text(line) == line


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("  12\texport GITHUB_TOKEN=ghp_" + "a" * 36, "  12\texport GITHUB_TOKEN="),
        ("AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMI/K7MDENG'", "AWS_SECRET_ACCESS_KEY="),
        ("aws id AKIAZ7Q3LPXW5R2N8K4M here", "aws id "),  # (the docs' ...EXAMPLE ids are not)
        ("slack xoxb-1234567890-abcdefghij", "slack "),
    ],
)
def test_the_scrubber_catches_common_secret_shapes(line, kept):
    from journal_agent.runtime.transcript import REDACTED, Scrubber

    out = Scrubber().text(line)
    assert out.startswith(kept) and REDACTED in out
