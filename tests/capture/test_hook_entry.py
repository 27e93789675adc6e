"""hooks/capture.sh, the hooks' entry as Claude Code runs it (``/bin/sh capture.sh EVENT``): an
event with nothing to do in the project starts no Python (each start is a session's wait on a
busy machine: benchmarks/session_overhead.py), and every event with something to do still
starts it and does it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.capture.hook_helpers import (
    inbox_lines,
    insight,
    proposals_after_session_end,
    run_hook,
)
from tests.e2e.claude_helpers import exec_shim

START = {"session_id": "s1", "source": "startup"}
PROMPT = {"session_id": "s1", "prompt_id": "p1", "prompt": "Should I recompute activations?"}
END = {"session_id": "s1", "reason": "other"}


def _counted_python(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose python3 (this interpreter) notes each start, with the event it runs."""
    starts = tmp_path / "python-starts"
    folder = tmp_path / "counted-bin"
    real = exec_shim(folder / "real-python3", sys.executable)
    (folder / "python3").write_text(f'#!/bin/sh\necho "$4" >>"{starts}"\nexec "{real}" "$@"\n')
    (folder / "python3").chmod(0o755)
    return {"PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"])}, starts


def _started(starts: Path) -> list[str]:
    return starts.read_text().split() if starts.exists() else []


def test_a_project_without_a_journal_starts_python_only_where_there_is_work(project, tmp_path):
    env, starts = _counted_python(tmp_path)
    for event, payload in (("UserPromptSubmit", PROMPT), ("SessionEnd", END)):
        done = run_hook(event, payload, project, env=env, entry=True)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert _started(starts) == []  # nothing to recall from, no session left to end
    assert not (project / ".journal").exists()
    # SessionStart (the plugin's state, what is due) and Stop (the turn's Insights) always run.
    assert run_hook("SessionStart", START, project, env=env, entry=True).returncode == 0
    stop = {"session_id": "s1", "last_assistant_message": insight("Caught through the entry.")}
    assert run_hook("Stop", stop, project, env=env, entry=True).returncode == 0
    assert _started(starts) == ["SessionStart", "Stop"]
    assert [m["text"] for m in inbox_lines(project)] == ["Caught through the entry."]


def test_recall_and_the_session_row_still_run_through_the_entry(project, transcript, cli, tmp_path):
    env, starts = _counted_python(tmp_path)
    (project / "learning_journal.md").write_text(
        "# Learning Journal\n\n## Activation checkpointing (2026-11-20)\n\n**Context**: Trainer."
        "\n\n**The Key Question I Had**: *Why recompute?*\n\n### 🎯 Intuition\n\nRecompute "
        "activations during backward to save memory.\n\n### 🏷️ Tags\n\n#memory\n"
    )
    cli(
        "journal",
        "search",
        "x",
        "--root",
        str(project),
        env={"JOURNAL_AGENT_EMBEDDING_MODEL": "off"},
    )
    assert run_hook("UserPromptSubmit", PROMPT, project, env=env, entry=True).returncode == 0
    [logged] = (project / ".journal" / "capture" / "recall.jsonl").read_text().splitlines()
    assert [h["title"] for h in json.loads(logged)["hits"]] == ["Activation checkpointing"]

    transcript.prompt("tune warmup")
    transcript.edit("train.py", "line 3", "line 3 warmup=500")
    final = insight("Warmup steps are counted before the schedule starts.")
    transcript.say(final)
    stop = {"session_id": "s1", "transcript_path": str(transcript.path),
            "last_assistant_message": final}  # fmt: skip
    run_hook("Stop", stop, project, env=env, entry=True)
    assert run_hook("SessionEnd", END, project, env=env, entry=True).returncode == 0
    [proposal] = proposals_after_session_end(project)
    [op] = json.loads(proposal.read_text())["operations"]
    assert op["topic"] == "worked on train.py"
    assert _started(starts) == ["UserPromptSubmit", "Stop", "SessionEnd"]


def test_a_linked_journal_folder_or_no_project_folder_is_left_to_python(project, tmp_path):
    """The shell never decides through a link (Python refuses it, and says so where it can),
    nor without CLAUDE_PROJECT_DIR (the payload's cwd names the project then)."""
    env, starts = _counted_python(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".journal").symlink_to(elsewhere)
    for event, payload in (("UserPromptSubmit", PROMPT), ("SessionEnd", END)):
        assert run_hook(event, payload, project, env=env, entry=True).stdout == b""
    assert _started(starts) == ["UserPromptSubmit", "SessionEnd"]
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    (project / ".journal").unlink()

    unset = {**env, "CLAUDE_PROJECT_DIR": ""}
    run_hook("SessionEnd", {**END, "cwd": str(project)}, project, env=unset, entry=True)
    assert _started(starts)[-1] == "SessionEnd"
