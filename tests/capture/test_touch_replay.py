"""The touch recall's precision on a slice of the replay set (tests/capture/touch_replay.py,
benchmarks/bench_touch_replay.py for the whole set): real coding sessions on a snapshot of this
repository's code, its learning journal appended through the journal's own append, each tool
call replayed through hooks.json's command in a process of its own, as Claude Code runs it.
On by default holds only while precision stays at 0.9 or more, and every line keeps to 40
tokens (cl100k, as the benchmark counts them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.capture.touch_replay import (
    LINE_TOKENS,
    REPO,
    SESSIONS,
    hook_env,
    make_project,
    replay,
    restore,
    score,
    tool_call,
)
from tests.capture.touch_replay_real import sessions as real_sessions
from tests.capture.touch_replay_real import starter

FLOOR = 0.9
# A whole-file Read then an edit of cited lines; a focused Grep; a Read of a window holding two
# entries; a Write that changes no cited line; a window holding three entries, one of them
# useful; a Grep that surveys many files.
SLICE = [0, 1, 3, 8, 11, 12]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    monkeypatch.setenv("JOURNAL_AGENT_EMBEDDING_MODEL", "off")
    root = tmp_path / "project"
    root.mkdir()
    return root, make_project(root)


def test_the_recall_on_a_slice_of_replayed_sessions_keeps_its_precision(project):
    root, ids = project
    result = score(replay(root, [SESSIONS[i] for i in SLICE], ids, hook_env(root), "t"))
    assert result["injected_lines"] >= 5, result  # it speaks: silence is no precision
    assert result["precision"] >= FLOOR, result["irrelevant"]
    assert result["recall"] >= 0.5, result["missed"]
    # Each line is the lines, their state and the command with the whole id, in 40 tokens.
    assert result["tokens_per_line_max"] <= LINE_TOKENS, result
    assert result["lines_over_40_tokens"] == 0 and result["cut_commands"] == 0
    # The baseline in the same run: the switch off says nothing at all.
    off = score(replay(root, [SESSIONS[i] for i in SLICE[:2]], ids,
                       hook_env(root, JOURNAL_AGENT_CAPTURE="0"), "off"))  # fmt: skip
    assert off["injected_lines"] == 0 and off["tokens_per_day"] == {"1": 0}


def test_every_session_of_the_replay_set_plays_on_the_snapshot(tmp_path: Path):
    """The set stays playable: every edit finds its text once, every Read and Grep its file."""
    root = tmp_path / "project"
    for session in SESSIONS:
        restore(root)
        for call in session.calls:
            tool, _, response = tool_call(root, call)
            if tool == "Grep":
                assert response["content"], call
            if tool == "Read":
                assert response["file"]["numLines"] > 0, call
            if tool == "Edit":
                assert response["structuredPatch"], call


# The set built from this repository's history (tests/capture/touch_replay_real.py): the
# commit whose edit changed a cited function of touch.py (976fe17), and the one that changed
# the settings' merge and approval read (bf79b92), ten commits later on the evolved files.
REAL_SLICE = [0, 10]


def test_real_sessions_from_the_history_name_the_entries_whose_lines_their_edits_change(project):
    root, ids = project
    chosen = [real_sessions()[i] for i in REAL_SLICE]
    assert [r.commit for r in chosen] == ["976fe17", "bf79b92"]
    result = score(replay(root, [r.session for r in chosen], ids, hook_env(root), "real",
                          starter(chosen)))  # fmt: skip
    assert result["useful_entries"] == 3, result  # touch-git; env-off and approved
    assert result["recall"] == 1.0, result["missed"]
    assert result["precision"] >= FLOOR, result["irrelevant"]
    assert result["tokens_per_line_max"] <= LINE_TOKENS, result


def test_every_real_session_is_its_commit_as_tool_calls_on_the_files_the_earlier_left():
    """Each session's hunks apply, in order, to the files the earlier commits left (checked
    line by line as the set is built); each Edit's old_string is once in its file, every edited
    file was read first, and the last session leaves the files as the last commit made them."""
    real = real_sessions()
    assert len(real) == 16 and real[0].commit == "976fe17"
    last = real[-1]
    for session in real:
        read: set[str] = set()
        state = dict(session.start)
        for call in session.session.calls:
            if call[0] == "Read":
                read.add(call[1])
            elif call[0] == "Edit":
                assert call[1] in read, call[1]
                assert state[call[1]].count(call[2]) == 1, call[:2]
                state[call[1]] = state[call[1]].replace(call[2], call[3])
            else:
                assert call[0] == "Write" and call[1] not in session.start, call[:2]
                state[call[1]] = call[3]
        if session is not last:
            following = real[real.index(session) + 1]
            assert state == following.start, session.commit
    for path, text in state.items():  # where the history is here (not a shallow clone)
        done = subprocess.run(["git", "-C", str(REPO), "show", f"{last.commit}:{path}"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert done.returncode != 0 or done.stdout == text, path
