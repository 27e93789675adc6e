"""Bash: real subprocesses in the workspace root, process-group timeouts, output limits."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolContext, ToolResult
from journal_agent.tools.bash import MAX_OUTPUT_CHARS, Bash
from journal_agent.tools.permissions import PermissionPolicy
from tests.processes import none_left


def bash(ws: Path, mode: str = "bypassPermissions", **params: object) -> ToolResult:
    policy = PermissionPolicy(ws, mode=mode)
    return Bash().call(ToolContext(root=ws, policy=policy), params)


def test_schema() -> None:
    schema = Bash.input_schema()
    assert list(schema["properties"]) == ["command", "timeout", "description"]
    assert schema["required"] == ["command"]
    assert schema["properties"]["timeout"]["maximum"] == 600_000


def test_runs_in_the_workspace_root_and_reports_the_exit_code(ws: Path) -> None:
    (ws / "hello.txt").write_text("hi\n")
    res = bash(ws, command="pwd && cat hello.txt")
    assert not res.is_error
    assert res.content == f"{ws}\nhi\n\nExit code 0"


def test_stderr_is_interleaved_and_a_failure_is_an_error(ws: Path) -> None:
    res = bash(ws, command="echo out; echo err >&2; exit 3")
    assert res.is_error
    assert res.content == "out\nerr\n\nExit code 3"


def test_no_output(ws: Path) -> None:
    assert bash(ws, command="true").content == "(no output)\n\nExit code 0"


def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    start = time.monotonic()
    res = bash(ws, command="sleep 100.101 & echo started; sleep 100", timeout=700)
    elapsed = time.monotonic() - start
    assert res.is_error and "timed out after 0.7 s" in res.content
    assert "started" in res.content
    assert none_left("100.101", wait_s=5), "the background child survived the timeout"
    assert elapsed < 60  # sanity: far below the 100 s sleep


def test_a_process_ignoring_sigterm_is_killed(ws: Path) -> None:
    res = bash(ws, command="trap '' TERM; sleep 100.102", timeout=500)
    assert res.is_error and "timed out" in res.content
    assert none_left("100.102", wait_s=5)  # the shell that ignored SIGTERM included


def test_background_children_left_behind_are_stopped(ws: Path) -> None:
    res = bash(ws, command="sleep 100.103 & echo done")
    assert not res.is_error
    assert "done" in res.content and "were stopped" in res.content
    assert none_left("100.103", wait_s=5)


def test_long_output_is_cut_in_the_middle_with_a_note(ws: Path) -> None:
    res = bash(ws, command="for i in $(seq 1 20000); do echo line-$i; done")
    assert "output truncated" in res.content
    assert res.content.startswith("line-1\nline-2\n")
    assert "line-20000" in res.content  # the end (errors, summaries) is kept
    body = res.content.split("\n\nExit code")[0]
    assert len(body) < MAX_OUTPUT_CHARS + 500


def test_huge_output_keeps_memory_bounded(ws: Path) -> None:
    # 200 MB through the pipe: kept are only the head and tail buffers.
    res = bash(ws, command="head -c 200000000 /dev/zero | tr '\\0' 'a'; echo; echo END")
    assert "output truncated" in res.content and "END" in res.content


def test_run_in_background_is_refused_with_a_reason(ws: Path) -> None:
    res = bash(ws, command="sleep 1", run_in_background=True)
    assert res.is_error and "not supported" in res.content
    assert "run_in_background" not in Bash.input_schema()["properties"]


def test_input_limits(ws: Path) -> None:
    res = bash(ws, command="true", timeout=600_001)
    assert res.is_error and "timeout" in res.content
    assert bash(ws, command="   ").is_error


def test_permission_is_checked_before_running(ws: Path) -> None:
    res = bash(ws, mode="default", command="touch made-it")
    assert res.is_error and "needs approval" in res.content
    assert not (ws / "made-it").exists()
    res = bash(ws, command="sudo touch made-it")
    assert res.is_error and not (ws / "made-it").exists()


def test_a_command_does_not_inherit_a_terminal_stdin(ws: Path) -> None:
    res = bash(ws, command="cat", timeout=5000)  # would hang forever reading a tty
    assert res.content == "(no output)\n\nExit code 0"


@pytest.mark.parametrize("pager_var", ["PAGER", "GIT_PAGER"])
def test_pagers_are_disabled(ws: Path, pager_var: str) -> None:
    res = bash(ws, command=f"echo ${pager_var}", mode="bypassPermissions")
    assert res.content.startswith("cat\n")


def test_process_group_is_new(ws: Path) -> None:
    res = bash(ws, command="ps -o pgid= -p $$; ps -o sid= -p $$")
    pgid, sid = (int(x) for x in res.content.split("\n\n")[0].split())
    assert pgid != os.getpgrp() and sid == pgid


def test_bash_never_sees_the_api_key(tmp_path, monkeypatch):
    from journal_agent.tools.registry import builtin_tools, make_context

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-SECRET-123")
    ctx = make_context(tmp_path, mode="bypassPermissions")
    result = builtin_tools()["Bash"].call(ctx, {"command": "env"})
    assert not result.is_error
    assert "PATH=" in result.content
    assert "sk-ant-test-SECRET-123" not in result.content


def test_exit_code_survives_when_the_output_is_cut_to_the_token_budget(ws: Path) -> None:
    # 30,000 characters of "y\n" are ~30,000 tokens: over the budget even after the cut.
    res = bash(ws, command="yes | head -c 1000000; exit 4")
    assert "Result truncated" in res.content
    assert res.content.endswith("Exit code 4")
    assert res.is_error


def test_a_command_killed_by_a_signal_says_which(ws: Path) -> None:
    res = bash(ws, command="kill -9 $$")
    assert res.is_error
    assert res.content.endswith("Exit code 137 (killed by SIGKILL)")


def test_a_background_child_with_its_output_redirected_is_stopped_too(ws: Path) -> None:
    # Orphaned (its subshell exits) and not holding the output pipe: still in the group.
    res = bash(ws, command="(sleep 300.104 >/dev/null 2>&1 & echo $!)")
    assert not res.is_error and "Background processes" in res.content
    assert none_left("300.104", wait_s=5)
