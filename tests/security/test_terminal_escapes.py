"""Terminal escapes a file planted are shown, never obeyed (#29: "inbox show and measurements
print terminal escapes raw").

Every command here prints text that came from a file a cloned repository can commit or a
model can write — the inbox, a measurement record, the journal, the review queue, an agent
file, a background run's status, the feedback history, a run's tool output, a refusal quoting a
line, the question put on the terminal before a tool call. Each plants the same payload (an
OSC 52 clipboard write, a screen clear, a C1 CSI colour, a right-to-left override, a bell) and
checks that none of its characters reached the output raw, that it is shown written out, and
that ``--json`` output parses back to the very same text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.entries import render_entry
from tests.runtime.runtime_helpers import write_agent

PLANT = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\u202egnp.exe"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
SHOWN = "\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x9b31m\\u202egnp.exe"
NO_MEANING = {"JOURNAL_AGENT_EMBEDDING_MODEL": "off"}


def _inert(out: str) -> None:
    for char in RAW:
        assert char not in out, f"{char!r} reached the terminal raw"
    assert SHOWN in out


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _run(cli, ws: Path, *args: str, **kwargs):
    return cli(*args, "--root", str(ws), home=ws.parent / "home", env=NO_MEANING, **kwargs)


def test_finding_inbox_show_and_list_print_a_planted_moment_inert(cli, ws):
    moment = {"id": "abc123abc123", "hash": "abc123abc123" + "0" * 52, "kind": "insight",
              "text": f"Warm-up {PLANT} counts optimizer steps.", "time": "2026-11-20T10:00:00Z",
              "session_id": "s1", "prompt_id": "p1", "agent": "", "files": [],
              "records": []}  # fmt: skip
    (ws / ".journal").mkdir()
    (ws / ".journal/inbox.jsonl").write_text(json.dumps(moment) + "\n")
    for args in (("inbox",), ("inbox", "show", "abc123")):
        done = _run(cli, ws, *args)
        assert done.returncode == 0, done.stderr
        _inert(done.stdout)
    raw = _run(cli, ws, "inbox", "--json").stdout
    assert not any(char in raw for char in RAW)  # JSON escapes them …
    assert json.loads(raw)[0]["text"] == moment["text"]  # … and they parse back the same


def test_finding_measurements_print_a_planted_record_inert(cli, ws):
    done = _run(cli, ws, "estimate", "--model", "gpt2-small", "--json")
    assert done.returncode == 0, done.stderr
    [path] = (ws / ".journal/measurements").glob("*.json")
    record = json.loads(path.read_text())
    record["title"] = f"GPT-2 {PLANT}"
    path.write_text(json.dumps(record))
    listed = _run(cli, ws, "measurements")
    assert listed.returncode == 0, listed.stderr
    # (rich cuts a long title in the table: what is left of the payload is written out)
    assert not any(char in listed.stdout for char in RAW) and "\\x1b]52" in listed.stdout
    shown = _run(cli, ws, "measurements", "show", record["id"])
    assert shown.returncode == 0, shown.stderr
    _inert(shown.stdout)
    as_json = _run(cli, ws, "measurements", "--json").stdout
    assert json.loads(as_json)[0]["title"] == record["title"]
    assert not any(char in as_json for char in RAW)


def test_journal_show_list_and_review_print_a_planted_entry_inert(cli, ws):
    entry = render_entry(f"ZeRO stage 2 {PLANT}", "2026-11-20", context="Studying.",
                         question=f"Why shard {PLANT}?", intuition=f"Gradients {PLANT} sharded.",
                         tags="#zero")  # fmt: skip
    (ws / "learning_journal.md").write_text("# Learning Journal\n\n" + entry)
    listed = _run(cli, ws, "journal", "list")
    assert listed.returncode == 0, listed.stderr
    assert not any(char in listed.stdout for char in RAW)
    ident = json.loads(_run(cli, ws, "journal", "list", "--json").stdout)[0]["id"]
    for args in (("journal", "show", ident), ("review", "--list", "--all")):
        done = _run(cli, ws, *args)
        assert done.returncode == 0, done.stderr
        _inert(done.stdout)


def test_agents_runs_and_feedback_history_print_planted_files_inert(cli, ws):
    # An agent file whose name holds the payload (its path is shown); a broken one beside it,
    # whose error on stderr quotes its path (markup in it must stay text too).
    evil = write_agent(ws, "evil", "You help.")
    evil.rename(evil.with_name(f"evil{PLANT}.md"))
    (ws / ".claude/agents/[bold]broken.md").write_text(f"---\nname: [b\ndescription: {PLANT}\n")
    run = ws / ".journal/runs/20261120-100000-abcdef"
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({
        "id": run.name, "status": "completed", "kind": "agent", "target": "evil",
        "prompt": f"go {PLANT}", "started": "2026-11-20T10:00:00+00:00"}))  # fmt: skip
    (ws / ".journal/history").mkdir(parents=True)
    (ws / ".journal/history/feedback.jsonl").write_text(json.dumps({
        "n": 1, "time": "2026-11-20T10:00:00+00:00", "kind": "feedback",
        "file": f".claude/commands/x{PLANT}.md", "feedback": "f", "before": "0" * 16,
        "after": "1" * 16, "added": 0, "removed": 0}) + "\n")  # fmt: skip
    agents = cli("agents", "--root", str(ws), home=ws.parent / "home", env={"COLUMNS": "400"})
    assert not any(char in agents.stdout + agents.stderr for char in RAW)
    assert SHOWN in agents.stdout and "[bold]broken.md" in agents.stderr
    runs = _run(cli, ws, "runs")
    assert not any(char in runs.stdout for char in RAW) and "\\x1b]52" in runs.stdout
    history = _run(cli, ws, "feedback", "--history")
    assert history.returncode == 0, history.stderr
    _inert(history.stdout)


def test_a_refusal_quoting_a_planted_line_prints_it_inert(cli, ws):
    draft = ws / "draft.md"
    draft.write_text(render_entry("ZeRO", "2026-11-20", context="Studying.", question="Why?",
                                  intuition=f'db password = "hunter2hunter2" {PLANT}',
                                  tags="#zero"))  # fmt: skip
    done = _run(cli, ws, "journal", "append", "--file", str(draft))
    assert done.returncode == 1 and "password assignment" in done.stderr
    _inert(done.stderr)
    assert "hunter2" not in done.stderr


def test_a_runs_rendering_shows_what_the_model_and_its_tools_said_inert(cli, ws):
    write_agent(ws, "reader", "You read.", tools="Read")
    (ws / "notes.md").write_text(f"{PLANT} first line of notes\n")
    model = ScriptedModel([
        reply(f"Reading {PLANT}", tool_use("Read", {"file_path": "notes.md"})),
        reply(f"The notes say {PLANT}."),
    ])  # fmt: skip
    with model.serve() as url:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-000000", "ANTHROPIC_BASE_URL": url}
        done = cli("run", "reader", "read notes.md", "--root", str(ws), "--yes",
                   home=ws.parent / "home", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _inert(done.stdout)  # the answer
    _inert(done.stderr)  # the progress lines: the model's text, the tool's first line


def test_the_question_before_a_tool_call_shows_a_planted_command_inert(cli, ws):
    """On a terminal, `tool Bash` in default mode asks before running a command that may write:
    an escape sequence in the command must not redraw the question (a command shown as `ls`)."""
    command = f"touch x # {PLANT}"
    args = ("tool", "Bash", json.dumps({"command": command}), "--root", str(ws))
    out, code = cli.terminal(*args, cwd=ws, home=ws.parent / "home", script=[(b"[y/N]", b"n\n")])
    assert "Allow Bash" in out and code == 1
    assert "\x1b]52" not in out and "\u202e" not in out and "\\x1b]52;c;cHduZWQ=" in out
    assert not (ws / "x").exists()
