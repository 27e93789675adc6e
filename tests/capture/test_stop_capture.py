"""Stop and SubagentStop: a turn's ★ Insight blocks, edits and records land in the inbox once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.hook_helpers import SCRIPT, inbox_lines, insight, run_hook
from tests.trust_helpers import write_settings


def stop_payload(transcript, last: str | None, **extra) -> dict:
    payload = {
        "session_id": "s1",
        "transcript_path": str(transcript.path),
        "cwd": str(transcript.root),
        "prompt_id": "p1",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        **extra,
    }
    if last is not None:
        payload["last_assistant_message"] = last
    return payload


def test_a_turn_with_an_insight_and_an_edit_becomes_one_moment_with_file_and_lines(
    project, transcript
):
    transcript.prompt("make the warm-up longer")
    transcript.say("Reading the schedule.")
    transcript.edit("train.py", "line 8\nline 9", "line 8 changed\nline 8b\nline 9 too")
    final = "Done.\n\n" + insight("Warm-up length is in steps, not epochs (train.py:8).")
    transcript.say(final)

    done = run_hook("Stop", stop_payload(transcript, final), project)

    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    [moment] = inbox_lines(project)
    assert moment["kind"] == "insight"
    assert moment["text"] == "Warm-up length is in steps, not epochs (train.py:8)."
    # lines 8-9 were replaced by three: the new lines 8-10 of train.py
    assert moment["files"] == [{"path": "train.py", "lines": [[8, 10]]}]
    lines = (project / "train.py").read_text().splitlines()
    assert lines[7:10] == ["line 8 changed", "line 8b", "line 9 too"]
    assert moment["session_id"] == "s1" and moment["prompt_id"] == "p1"
    assert moment["hash"].startswith(moment["id"]) and moment["time"].endswith("Z")
    assert not (project / ".journal" / "hooks.log").exists()


def test_insights_from_the_whole_turn_and_both_glyphs_are_captured_once(project, transcript):
    transcript.prompt("explain")
    transcript.say("First.\n" + insight("Gradients are sharded in ZeRO-2.", star="✶"))
    transcript.meta("Stop hook feedback: keep going")  # a Stop-block continuation
    final = "Second.\n" + insight("Optimizer states are sharded in ZeRO-1.")
    transcript.say(final)

    run_hook("Stop", stop_payload(transcript, final), project)
    run_hook("Stop", stop_payload(transcript, final), project)  # the same turn, again

    texts = [m["text"] for m in inbox_lines(project)]
    assert texts == ["Gradients are sharded in ZeRO-2.", "Optimizer states are sharded in ZeRO-1."]


def test_the_next_turn_captures_only_what_is_new(project, transcript):
    transcript.prompt("one")
    first = insight("Activations scale with sequence length.")
    transcript.say(first)
    run_hook("Stop", stop_payload(transcript, first), project)

    transcript.prompt("two", prompt_id="p2")
    second = insight("Checkpointing trades compute for activation memory.")
    transcript.say(second)
    run_hook("Stop", stop_payload(transcript, second, prompt_id="p2"), project)

    moments = inbox_lines(project)
    assert [(m["prompt_id"], m["text"][:12]) for m in moments] == [
        ("p1", "Activations "),
        ("p2", "Checkpointin"),
    ]
    assert moments[1]["files"] == []


def test_inline_code_and_fences_at_either_end_of_an_insight_keep_their_backticks(
    project, transcript
):
    bodies = [
        "`torch.compile` fuses the optimizer step into one kernel.",
        "The fused step is `torch._foreach_add_`",
        "```python\nmodel = torch.compile(model)\n```",
    ]
    transcript.prompt("why is it faster")
    final = "\n\n".join(insight(body) for body in bodies)
    transcript.say(final)

    run_hook("Stop", stop_payload(transcript, final), project)

    assert [m["text"] for m in inbox_lines(project)] == bodies


def test_the_final_message_counts_when_the_transcript_is_missing(project, tmp_path):
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "nowhere.jsonl"),
        "last_assistant_message": insight("bf16 keeps fp32's exponent range."),
    }
    done = run_hook("Stop", payload, project)
    assert done.returncode == 0 and done.stdout == b""
    assert [m["text"] for m in inbox_lines(project)] == ["bf16 keeps fp32's exponent range."]
    log = (project / ".journal" / "hooks.log").read_text().splitlines()
    assert len(log) == 1 and "Stop transcript unreadable (FileNotFoundError" in log[0]


def test_private_spans_are_never_captured_and_secrets_are_redacted(project, transcript):
    transcript.prompt("x")
    secret = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8" * 3
    hidden = "<private>\n" + insight("my salary is 123k") + "\n</private>"
    final = hidden + "\n" + insight(f"The key was {secret}; <private>ssn 123</private>kept.")
    transcript.say(final)

    run_hook("Stop", stop_payload(transcript, final), project)

    [moment] = inbox_lines(project)
    assert moment["text"] == "The key was [REDACTED]; kept."
    raw = (project / ".journal" / "inbox.jsonl").read_text()
    assert "salary" not in raw and "ssn" not in raw and secret not in raw


def test_records_created_this_turn_are_kept_and_a_measuring_turn_is_a_moment(project, transcript):
    records = project / ".journal" / "measurements"
    records.mkdir(parents=True)
    (records / "est-1a2b3c4d.json").write_text("{}")
    transcript.prompt("how much memory")
    transcript.tool_result("toolu_9", "Peak 13.48 GB [m:est-1a2b3c4d] and [m:est-00000000]")
    transcript.say("It needs 13.48 GB [m:est-1a2b3c4d].")

    run_hook("Stop", stop_payload(transcript, "It needs 13.48 GB [m:est-1a2b3c4d]."), project)

    [moment] = inbox_lines(project)
    assert moment["kind"] == "measurement"
    assert moment["records"] == ["est-1a2b3c4d"]  # the one that does not exist is left out
    assert moment["text"] == "Measured this turn: [m:est-1a2b3c4d]"


def test_a_turn_with_nothing_to_learn_writes_no_inbox(project, transcript):
    transcript.prompt("hi")
    transcript.say("Hello.")
    run_hook("Stop", stop_payload(transcript, "Hello."), project)
    assert not (project / ".journal" / "inbox.jsonl").exists()


def test_subagents_are_captured_except_our_own_learning_journal(project, tmp_path):
    from tests.capture.hook_helpers import Transcript

    agent = Transcript(tmp_path / "agent-1.jsonl", project)
    agent.prompt("look into it")
    agent.say(insight("FSDP gathers parameters per unit."), sidechain=True)
    base = {"session_id": "s1", "agent_id": "a1", "agent_transcript_path": str(agent.path)}

    run_hook("SubagentStop", {**base, "agent_type": "journal-agent:learning-journal"}, project)
    assert inbox_lines(project) == []

    run_hook("SubagentStop", {**base, "agent_type": "Explore"}, project)
    [moment] = inbox_lines(project)
    assert moment["agent"] == "Explore" and moment["text"] == "FSDP gathers parameters per unit."


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1, 2]", b"\xff\xfe\x00garbage", b'{"transcript_path": 42}'],
    ids=["empty", "text", "list", "binary", "wrong-types"],
)
@pytest.mark.parametrize("event", ["Stop", "SessionStart", "UserPromptSubmit", "SessionEnd"])
def test_garbage_on_stdin_exits_0_prints_nothing_and_logs_one_line(project, event, stdin):
    done = run_hook(event, stdin, project)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    log = project / ".journal" / "hooks.log"
    assert not log.exists() or len(log.read_text().splitlines()) == 1


def test_huge_stdin_is_not_read_whole(project):
    done = run_hook("Stop", b'{"x": "' + b"a" * (9 << 20) + b'"}', project)
    assert (done.returncode, done.stdout) == (0, b"")
    assert "stdin is over 8 MB" in (project / ".journal" / "hooks.log").read_text()


def test_an_unknown_event_and_a_read_only_journal_fail_open(project, transcript):
    assert run_hook("Nonsense", {}, project).returncode == 0
    transcript.prompt("x")
    final = insight("Something worth keeping.")
    state = project / ".journal"
    state.chmod(0o500)
    try:
        done = run_hook("Stop", stop_payload(transcript, final), project)
    finally:
        state.chmod(0o700)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    if os.geteuid() != 0:  # root writes through a read-only directory
        assert not (state / "inbox.jsonl").exists()


def test_the_hook_log_stays_bounded(project):
    log = project / ".journal" / "hooks.log"
    log.parent.mkdir()
    log.write_text("x" * (70 << 10))
    run_hook("Stop", b"garbage", project)
    assert log.stat().st_size < 1000
    assert (project / ".journal" / "hooks.log.1").stat().st_size == 70 << 10


def test_the_recursion_guard_turns_every_hook_off(project, transcript):
    transcript.prompt("x")
    final = insight("Never captured.")
    done = run_hook(
        "Stop", stop_payload(transcript, final), project, env={"JOURNAL_AGENT_HOOK": "1"}
    )
    assert done.returncode == 0 and not (project / ".journal").exists()


def test_the_env_switch_and_the_settings_turn_capture_off(project, transcript):
    transcript.prompt("x")
    final = insight("Not captured while off.")
    run_hook("Stop", stop_payload(transcript, final), project, env={"JOURNAL_AGENT_CAPTURE": "0"})
    assert inbox_lines(project) == []
    (project / ".journal").mkdir(exist_ok=True)
    write_settings(project, ".journal/settings.json", {"capture": {"enabled": False}})
    run_hook("Stop", stop_payload(transcript, final), project)
    assert inbox_lines(project) == []


def test_concurrent_sessions_append_whole_lines(project, tmp_path):
    """Eight hooks at once (eight sessions ending their turns): every moment, every line whole."""
    procs = []
    for i in range(8):
        payload = {
            "session_id": f"s{i}",
            "transcript_path": str(tmp_path / "none.jsonl"),
            "last_assistant_message": "\n".join(
                insight(f"moment {i}.{k} " + "z" * 3000) for k in range(5)
            ),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-I", "-S", str(SCRIPT), "Stop"],
                stdin=subprocess.PIPE,
                cwd=project,
                env={"CLAUDE_PROJECT_DIR": str(project), "PATH": os.environ["PATH"]},
            )
        )
        procs[-1].stdin.write(json.dumps(payload).encode())
    for proc in procs:
        proc.stdin.close()
    assert [p.wait(120) for p in procs] == [0] * 8  # eight interpreters on a loaded CI machine
    texts = sorted(m["text"].split()[1] for m in inbox_lines(project))
    assert texts == sorted(f"{i}.{k}" for i in range(8) for k in range(5))


def test_the_hook_reads_a_huge_transcript_from_its_end(project, transcript):
    """A 40 MB history before this turn: the turn is still found (and quickly, see the bench)."""
    transcript.prompt("old")
    transcript.say("x" * 4000)
    line = transcript.path.read_text().splitlines()[-1] + "\n"
    with transcript.path.open("a") as f:
        f.write(line * 10_000)
    transcript.prompt("new", prompt_id="p9")
    final = insight("Only this turn counts.")
    transcript.say(final)
    assert transcript.path.stat().st_size > 40_000_000
    run_hook("Stop", stop_payload(transcript, final, prompt_id="p9"), project)
    assert [m["text"] for m in inbox_lines(project)] == ["Only this turn counts."]


def test_the_plugin_registers_only_events_the_oldest_cli_knows_in_exec_form():
    hooks = json.loads((Path(__file__).resolve().parents[2] / "hooks" / "hooks.json").read_text())
    known_197 = {"SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "SessionEnd"}
    known_197 |= {"PostToolUse", "SubagentStart"}
    assert set(hooks["hooks"]) == known_197  # and never PreToolUse
    # PostToolUse only for the tools that touch code an entry may cite, never every call.
    assert [g["matcher"] for g in hooks["hooks"]["PostToolUse"]] == [
        "Read|Edit|MultiEdit|Write|Grep"
    ]
    for groups in hooks["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                assert hook["type"] == "command" and hook["command"] == "/bin/sh"
                assert hook["args"][0] == "${CLAUDE_PLUGIN_ROOT}/hooks/capture.sh"


def test_a_transcript_replaced_by_a_shorter_one_is_read_again_from_its_start(project, transcript):
    transcript.prompt("one")
    transcript.say("x" * 5000 + "\n" + insight("First."))
    run_hook("Stop", stop_payload(transcript, None), project)
    transcript.path.write_text("")  # replaced (the same path, a new and shorter file)
    transcript.prompt("two", prompt_id="p2")
    transcript.say(insight("Second, in the new file."))
    run_hook("Stop", stop_payload(transcript, None, prompt_id="p2"), project)
    assert [m["text"] for m in inbox_lines(project)] == ["First.", "Second, in the new file."]


def test_the_hook_exits_0_when_claude_code_stops_reading_its_output(project):
    """SessionStart's reader goes away (a timeout): no exit status 120 from the failed flush."""
    (project / ".journal").mkdir()
    from journal_agent.capture.store import append, new_moment

    append(project, [new_moment("insight", "Waiting.")])
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "SessionStart"],
        input=b'{"session_id": "s1"}',
        stdout=write,
        stderr=subprocess.PIPE,
        env={"CLAUDE_PROJECT_DIR": str(project), "PATH": os.environ["PATH"]},
        timeout=30,
    )
    os.close(write)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert "BrokenPipeError" in (project / ".journal" / "hooks.log").read_text()


def test_stop_reads_again_until_claude_code_has_written_the_turn(project, transcript, monkeypatch):
    """Claude Code 2.1.197 can run Stop before the turn's last lines are on disk (tests/e2e saw
    the Edit and its result missing). The first read here finds only the prompt; the rest is
    written after it, and the capture still gets the edit and the final message."""
    import threading

    from journal_agent.capture import moments

    transcript.prompt("make the warm-up longer")
    final = insight("Warm-up length is in steps, not epochs (train.py:8).")
    first_read = threading.Event()
    real_read = moments.read_turn

    def read_and_tell(*args, **kwargs):  # the real read; the test only learns when it happened
        try:
            return real_read(*args, **kwargs)
        finally:
            first_read.set()

    def claude_code_flushes_late():
        first_read.wait(60)
        transcript.edit("train.py", "line 8", "line 8 changed")
        transcript.say(final)

    monkeypatch.setattr(moments, "read_turn", read_and_tell)
    monkeypatch.setattr(moments, "FLUSH_WAIT", 60)  # generous: only the final message ends it
    writer = threading.Thread(target=claude_code_flushes_late)
    writer.start()
    turn = moments._read_when_written(str(transcript.path), 0, False, final)
    writer.join()
    assert turn.texts == [final]
    assert list(turn.edits.values()) == [[(8, 8)]]


def test_a_transcript_that_never_gets_the_final_message_is_captured_as_far_as_written(
    project, transcript
):
    transcript.prompt("x")
    transcript.edit("train.py", "line 3", "line 3 changed")
    final = insight("Only in the hook's payload.")
    done = run_hook("Stop", stop_payload(transcript, final), project)
    assert (done.returncode, done.stdout) == (0, b"")
    [moment] = inbox_lines(project)
    assert moment["text"] == "Only in the hook's payload."
    assert moment["files"] == [{"path": "train.py", "lines": [[3, 3]]}]
    log = (project / ".journal" / "hooks.log").read_text()
    assert "the transcript lags the final message" in log
