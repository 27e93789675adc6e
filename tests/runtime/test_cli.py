"""The CLI as a user runs it against a scripted model served on 127.0.0.1: in-process, and in a
real subprocess where the process matters (a terminal, Ctrl-C)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from journal_agent.testing import ScriptedModel, http_error, reply, tool_use
from tests.runtime.runtime_helpers import write_agent, write_command

KEY = "sk-ant-cli-test-key-0123456789abcdef"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    write_agent(
        root,
        "scribe",
        "You are the scribe. Write what you are told.",
        tools="Read, Write",
        model="haiku",
    )
    return root


def _env(root, key=KEY, base_url=None):
    """The run's environment: a throw-away HOME, no ANTHROPIC_* but the key and URL given."""
    env = {k: None for k in os.environ if k.startswith("ANTHROPIC_")}
    env["HOME"] = str(root.parent / "home")
    if key:
        env["ANTHROPIC_API_KEY"] = key
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return env


@pytest.fixture
def run(cli):
    """``run(root, *args, base_url=, key=)``: ``journal-agent ARGS --root ROOT --`` in-process."""

    def go(root, *args, base_url=None, key=KEY, after_dashes=()):
        env = _env(root, key, base_url)
        return cli(*args, "--root", str(root), "--", *after_dashes, env=env)

    return go


def _scribe_script(name: str = "notes.md") -> list:
    return [
        reply(
            "I'll write it.",
            tool_use("Write", {"file_path": name, "content": "# Notes\n"}),
            usage={"input_tokens": 900, "output_tokens": 50, "cache_creation_input_tokens": 1200},
        ),
        reply(
            "Wrote notes.md.",
            usage={"input_tokens": 40, "output_tokens": 10, "cache_read_input_tokens": 1200},
        ),
    ]


def test_run_writes_files_prints_answer_and_summary(project, run):
    model = ScriptedModel(_scribe_script())
    with model.serve() as url:
        done = run(
            project, "run", "scribe", "write notes", "--yes", "--mode", "acceptEdits", base_url=url
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Wrote notes.md."
    assert (project / "notes.md").read_text() == "# Notes\n"
    err = done.stderr
    assert "Write" in err and "✓" in err  # the live tool line
    assert "2 turns" in err and "claude-haiku-5-5" in err
    assert "files changed: notes.md" in err and "cost $" in err
    # usage and cost per turn, then for the run
    assert "↳ 2,100 in (0 cache read, 1,200 cache write) · 50 out · $" in err
    assert "↳ 1,240 in (1,200 cache read, 0 cache write) · 10 out · $" in err
    # the first request went to our base URL with the agent's system prompt and tools
    first = model.requests[0]
    assert first.path == "/v1/messages"
    assert first.system_text.startswith("You are the scribe.")
    assert [t["name"] for t in first.body["tools"]] == ["Read", "Write"]
    transcripts = list((project / ".journal" / "transcripts").glob("*.jsonl"))
    assert len(transcripts) == 1 and KEY not in transcripts[0].read_text()


def test_json_output_and_permission_denial_without_a_terminal(project, run):
    model = ScriptedModel(_scribe_script())
    with model.serve() as url:
        done = run(project, "run", "scribe", "write notes", "--json", base_url=url)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed" and summary["tools_used"] == {"Write": 1}
    assert [(t["agent"], t["turn"], t["input"], t["cache_read"]) for t in summary["per_turn"]] == [
        ("main", 1, 900, 0),
        ("main", 2, 40, 1200),
    ]
    # haiku 5.5: 900 * 0.1 + 50 * 0.5 + 1200 * 0.125 per million
    assert summary["per_turn"][0]["cost_usd"] == pytest.approx(0.000265)
    # default mode asks before Write; with no terminal to ask, the model gets a denial
    denied = model.requests[1].body["messages"][-1]["content"][0]
    assert denied["is_error"] is True
    assert not (project / "notes.md").exists() and summary["files_changed"] == []


def test_401_is_one_sentence_and_exit_code_2(project, run):
    model = ScriptedModel([http_error(401, "invalid x-api-key")])
    with model.serve() as url:
        done = run(project, "run", "scribe", "hi", "--yes", base_url=url)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: the Anthropic API rejected")
    assert "Traceback" not in done.stderr


def test_missing_key_exit_code_2_but_dry_run_needs_none(project, run):
    done = run(project, "run", "scribe", "hi", "--yes", key=None)
    assert done.returncode == 2 and "ANTHROPIC_API_KEY is not set" in done.stderr
    done = run(project, "run", "scribe", "hi there", "--dry-run", "--thinking", "4096", key=None)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    req = out["request"]
    assert req["model"] == "claude-haiku-5-5"
    assert req["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert req["messages"][0]["content"][0]["text"] == "hi there"
    assert req["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert out["estimated_input_tokens"]["total"] > 0 and "estimate" in out["note"]


def test_learn_dry_run_expands_the_plugin_command(project, run):
    done = run(project, "learn", "ZeRO", "stage", "2", "--dry-run", key=None)
    assert done.returncode == 0, done.stderr
    req = json.loads(done.stdout)["request"]
    first = req["messages"][0]["content"][0]["text"]
    assert "ZeRO stage 2" in first
    assert "Task" in [t["name"] for t in req["tools"]]


@pytest.mark.slow
def test_background_run_detaches_records_and_can_be_waited_for(project, run):
    model = ScriptedModel(_scribe_script("bg.md"))
    with model.serve() as url:
        started = run(
            project,
            "run",
            "--background",
            "--mode",
            "acceptEdits",
            "--json",
            base_url=url,
            after_dashes=["scribe", "--write bg"],  # a prompt that looks like an option
        )
        assert started.returncode == 0, started.stderr
        run_id = json.loads(started.stdout)["id"]
        waited = run(project, "wait", run_id, "--timeout", "90", base_url=url)
    assert waited.returncode == 0, waited.stderr + waited.stdout
    assert waited.stdout.strip() == "Wrote notes.md."
    assert (project / "bg.md").read_text() == "# Notes\n"
    listed = run(project, "runs", "--json")
    (status,) = json.loads(listed.stdout)
    assert status["id"] == run_id and status["status"] == "completed"
    assert status["result"]["files_changed"] == ["bg.md"]
    assert status["target"] == "scribe" and status["exit_code"] == 0
    assert model.requests[0].body["messages"][0]["content"][0]["text"] == "--write bg"
    log = project / ".journal" / "runs" / run_id / "output.log"
    assert "files changed: bg.md" in log.read_text()


def test_on_a_terminal_the_models_question_is_put_to_the_user(project, cli):
    import pty

    model = ScriptedModel(
        [
            reply("What concept should I record?"),
            reply("Recorded ZeRO stage 2. Was this entry helpful?"),
        ]
    )
    master, slave = pty.openpty()
    env = cli.environment(_env(project))
    os.write(master, b"ZeRO stage 2\n\n")  # the reply, then an empty line: done
    with model.serve() as url:
        env["ANTHROPIC_BASE_URL"] = url
        done = subprocess.run(
            cli.command("run", "scribe", "hi", "--root", str(project)),
            stdin=slave,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    os.close(slave)
    os.close(master)
    assert done.returncode == 0, done.stderr
    assert len(model.requests) == 2
    assert model.requests[1].body["messages"][-1]["content"][0]["text"] == "ZeRO stage 2"
    assert "What concept should I record?" in done.stderr
    assert done.stdout.strip() == "Recorded ZeRO stage 2. Was this entry helpful?"


def test_background_run_fails_fast_without_key_or_agent(project, run):
    done = run(project, "run", "scribe", "hi", "--background", key=None)
    assert done.returncode == 2 and "ANTHROPIC_API_KEY is not set" in done.stderr
    done = run(project, "run", "nobody", "hi", "--background")
    assert done.returncode == 1 and "no agent named 'nobody'" in done.stderr
    assert not (project / ".journal" / "runs").exists()


@pytest.mark.slow
def test_a_background_run_that_dies_is_reported_failed(project, run):
    import signal
    import threading
    import time

    release = threading.Event()

    def hang(body):  # the model never answers, until the test is over
        release.wait(60)
        return reply("too late")

    model = ScriptedModel([hang])
    with model.serve() as url:
        started = run(project, "run", "scribe", "hang", "-b", "--json", base_url=url)
        status = json.loads(started.stdout)
        deadline = time.monotonic() + 60
        while not model.requests and time.monotonic() < deadline:  # it reached the model
            time.sleep(0.1)
        os.kill(status["pid"], signal.SIGKILL)
        waited = run(project, "wait", status["id"], "--timeout", "30")
        release.set()
    assert waited.returncode == 1
    assert "failed" in waited.stderr and "exited without recording a result" in waited.stderr


def _has_journal_tool() -> bool:
    from journal_agent.tools.registry import builtin_tools

    return "JournalAppend" in builtin_tools()


def _entry(title: str) -> str:
    return (
        f"## {title} (2026-11-21)\n\n"
        "**Context**: Studying the training configuration.\n\n"
        "**The Key Question I Had**: *Why shard the optimizer state?*\n\n"
        "### 🎯 Intuition\nEach rank keeps only its share of the optimizer state.\n\n"
        "### 🏷️ Tags\n#zero\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(not _has_journal_tool(), reason="JournalAppend is not in the registry yet")
def test_parallel_background_runs_appending_to_the_journal_lose_nothing(project, run):
    write_agent(project, "journalist", "You are the journalist.", tools="JournalAppend")

    def respond(body):  # the same script for every process; requests interleave
        last = body["messages"][-1]["content"]
        if last[0].get("type") == "tool_result":
            return reply("Appended.")
        title = last[0]["text"]
        return reply(tool_use("JournalAppend", {"entry": _entry(title), "force": True}))

    titles = [f"Sharding lesson {i}" for i in range(3)]
    model = ScriptedModel([respond] * (2 * len(titles)))
    with model.serve() as url:
        ids = []
        for title in titles:
            started = run(project, "run", "journalist", title, "-b", "--json", base_url=url)
            assert started.returncode == 0, started.stderr
            ids.append(json.loads(started.stdout)["id"])
        waited = run(project, "wait", *ids, "--timeout", "120")
        assert waited.returncode == 0, waited.stderr
    journal = (project / "learning_journal.md").read_text(encoding="utf-8")
    for title in titles:
        assert journal.count(f"## {title} (2026-11-21)") == 1


@pytest.mark.slow
def test_ctrl_c_with_parallel_subagents_waiting_ends_the_run_at_once(project, cli):
    import signal
    import threading
    import time

    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "sub", "You are sub.")
    release = threading.Event()

    def hang(body):  # neither sub-agent's model answers until the test is over
        release.wait(90)
        return reply("too late")

    tasks = [
        tool_use("Task", {"description": f"t{i}", "prompt": "p", "subagent_type": "sub"})
        for i in range(2)
    ]
    model = ScriptedModel([reply(*tasks)], routes={"You are sub.": [hang, hang]})
    env = cli.environment(_env(project))
    try:
        with model.serve() as url:
            env["ANTHROPIC_BASE_URL"] = url
            proc = subprocess.Popen(
                cli.command("run", "lead", "go", "--root", str(project)),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 60
            while len(model.requests) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)  # the lead's request and both sub-agents' are in
            assert len(model.requests) == 3
            proc.send_signal(signal.SIGINT)
            # it must end while both sub-agents' requests are still unanswered
            _, err = proc.communicate(timeout=60)
            assert not release.is_set()
    finally:
        release.set()
    assert proc.returncode == 130
    assert "interrupted: the run was interrupted (Ctrl-C)" in err and ".jsonl" in err
    assert "Traceback" not in err
    (transcript,) = (project / ".journal" / "transcripts").glob("*.jsonl")
    kinds = [json.loads(line)["type"] for line in transcript.read_text().splitlines()]
    assert "interrupted" in kinds


@pytest.mark.slow
def test_a_background_run_keeps_secrets_out_of_its_status_and_log(project, run):
    (project / "setup.sh").write_text(f"export ANTHROPIC_API_KEY={KEY}\n")
    model = ScriptedModel(
        [reply(tool_use("Read", {"file_path": "setup.sh"})), reply(f"The key is {KEY}.")]
    )
    with model.serve() as url:
        started = run(
            project,
            "run",
            "scribe",
            "read setup.sh",
            "-b",
            "--json",
            "--mode",
            "acceptEdits",
            base_url=url,
        )
        run_id = json.loads(started.stdout)["id"]
        waited = run(project, "wait", run_id, "--timeout", "90", "--json")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["result"]["final_text"] == "The key is [REDACTED]."
    for path in (project / ".journal").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_max_retries_is_configurable(project, run):
    model = ScriptedModel([http_error(529, "Overloaded"), reply("fine")])
    with model.serve() as url:
        done = run(project, "run", "scribe", "hi", "--yes", "--max-retries", "0", base_url=url)
    assert done.returncode == 1 and len(model.requests) == 1
    assert "kept failing (529: Overloaded) after 0 retries" in done.stderr
    model = ScriptedModel([http_error(529), http_error(529), http_error(529), reply("fine")])
    with model.serve() as url:
        done = run(project, "run", "scribe", "hi", "--yes", "--max-retries", "3", base_url=url)
    assert done.returncode == 0 and done.stdout.strip() == "fine" and len(model.requests) == 4


@pytest.mark.slow
def test_ctrl_c_stops_the_commands_subagents_started(project, cli):
    import signal
    import time
    import uuid

    import psutil

    marker = f"marker-{uuid.uuid4().hex}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(97)' {marker}"
    write_agent(project, "lead", "You are the lead.", tools="Task")
    write_agent(project, "sub", "You are sub.", tools="Bash")

    def running() -> list:
        return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]

    tasks = [
        tool_use("Task", {"description": f"t{i}", "prompt": "p", "subagent_type": "sub"})
        for i in range(2)
    ]
    sub = [reply(tool_use("Bash", {"command": sleeper})) for _ in range(2)]
    model = ScriptedModel([reply(*tasks)], routes={"You are sub.": sub})
    env = cli.environment(_env(project))
    flags = ["--root", str(project), "--mode", "bypassPermissions"]
    try:
        with model.serve() as url:
            env["ANTHROPIC_BASE_URL"] = url
            proc = subprocess.Popen(
                cli.command("run", "lead", "go", *flags),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            # Both sub-agents' commands are running (generous: CI runs this on loaded cores).
            deadline = time.monotonic() + 180
            while len(running()) < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if len(running()) < 2:
                proc.kill()
                out, err = proc.communicate(timeout=60)
                raise AssertionError(f"{len(running())} of 2 commands started\n{out}\n{err}")
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        assert proc.returncode == 130
        assert running() == []  # nothing the run started outlives it
    finally:
        for p in running():
            p.kill()


def test_command_runs_any_slash_command_with_its_arguments(project, run):
    write_command(project, "note", "Note $ARGUMENTS now.", **{"allowed-tools": "Read"})
    done = run(project, "command", "/note", "ZeRO", "stage 2", "--dry-run", key=None)
    assert done.returncode == 0, done.stderr
    req = json.loads(done.stdout)["request"]
    assert req["messages"][0]["content"][0]["text"].rstrip() == "Note ZeRO stage 2 now."
    assert [t["name"] for t in req["tools"]] == ["Read"]
    missing = run(project, "command", "nope", key=None)
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("error: no command named 'nope'")
