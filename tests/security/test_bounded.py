"""Bounded everywhere: every input a hostile or careless call can send ends in time, in bounded
memory, with one sentence — never a hang, a flood or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolContext
from journal_agent.tools.permissions import PermissionPolicy
from journal_agent.tools.registry import builtin_tools


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "journal_agent", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def one_sentence_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


def test_grep_without_a_head_limit_on_a_million_matching_lines_stays_bounded(tmp_path):
    with open(tmp_path / "big.log", "w") as f:
        for i in range(1_000_000):
            f.write(f"match line {i}\n")
    # The peak memory of the CLI process (its children's maximum, measured from a parent
    # that ran nothing else): was 1.7 GB for 3 M lines when the output was unbounded.
    probe = (
        "import resource, subprocess, sys, json\n"
        "done = subprocess.run([sys.executable, '-m', 'journal_agent', 'tool', 'Grep',"
        " json.dumps({'pattern': 'match', 'output_mode': 'content', 'head_limit': 0}),"
        f" '--root', {str(tmp_path)!r}], capture_output=True, text=True)\n"
        "print(json.dumps({'out': done.stdout, 'rss_kb':"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
    )
    res = json.loads(
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    )
    out = res["out"]
    assert "big.log:1:match line 0" in out
    assert len(out) < 150_000  # about Claude Code's 25,000-token tool-result limit
    assert "more exist" in out and "offset=" in out
    assert res["rss_kb"] < 400_000


def test_grep_on_a_fifo_is_one_sentence(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    ctx = ToolContext(root=tmp_path, policy=PermissionPolicy(tmp_path))
    res = builtin_tools()["Grep"].call(ctx, {"pattern": "x", "path": "pipe"})
    assert res.is_error and "not a regular file or a directory" in res.content
    # A FIFO inside a searched directory is skipped, not waited on.
    (tmp_path / "a.txt").write_text("x\n")
    res = builtin_tools()["Grep"].call(ctx, {"pattern": "x"})
    assert not res.is_error and "a.txt" in res.content


def test_a_pathological_pattern_ends(tmp_path):
    (tmp_path / "a.txt").write_text("a" * 200_000 + "\n")
    ctx = ToolContext(root=tmp_path, policy=PermissionPolicy(tmp_path))
    res = builtin_tools()["Grep"].call(ctx, {"pattern": "a{1000}{1000}", "output_mode": "content"})
    assert res.content in ("No matches found",) or "took longer" in res.content


def test_journal_search_caps_the_query(tmp_path):
    (tmp_path / "learning_journal.md").write_text("## A (2026-11-21)\n\nword\n")
    ctx = ToolContext(root=tmp_path, policy=PermissionPolicy(tmp_path))
    res = builtin_tools()["JournalSearch"].call(ctx, {"query": " ".join(["word"] * 400_000)})
    assert res.is_error and "too long" in res.content and "\n" not in res.content
    done = cli("journal", "search", *["word"] * 100, "--root", str(tmp_path), cwd=tmp_path)
    assert "too long" in one_sentence_error(done)


def test_mcp_answers_a_line_that_is_not_json_with_a_parse_error(tmp_path):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "journal_agent", "mcp", "--root", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("this is not json\n" + '{"a": 1}\n' + json.dumps(init) + "\n")
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(3)]
    finally:
        proc.kill()
        proc.wait()
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32700
    assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
    assert answers[2]["id"] == 1 and "result" in answers[2]  # the server keeps serving


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--gpu-mem", "inf"], "finite"),
        (["--seq", "99999999999999999999"], "--seq"),
        (["--plot", "keep.md"], "'.md'"),
        (["--plot", "existing.svg"], "--force"),
    ],
)
def test_estimate_flags_are_validated_and_files_kept(tmp_path, flags, says):
    (tmp_path / "keep.md").write_text("mine\n")
    (tmp_path / "existing.svg").write_text("<svg/>\n")
    done = cli("estimate", "--params", "7e9", *flags, "--root", str(tmp_path), cwd=tmp_path)
    assert says in one_sentence_error(done)
    assert (tmp_path / "keep.md").read_text() == "mine\n"
    assert (tmp_path / "existing.svg").read_text() == "<svg/>\n"


def test_plot_overwrites_only_with_force(tmp_path):
    (tmp_path / "existing.svg").write_text("<svg/>\n")
    done = cli("estimate", "--params", "7e9", "--plot", "existing.svg", "--force",
               "--root", str(tmp_path), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "existing.svg").read_text() != "<svg/>\n"


def test_journal_check_reports_an_impossible_date_and_a_nul_byte(tmp_path):
    (tmp_path / "learning_journal.md").write_bytes(
        "## Bad Date (2026-13-45)\n\n**Context**: x\n\n**The Key Question I Had**: *y?*\n\n"
        "### 🎯 Intuition\nbefore\x00after\n\n### 🏷️ Tags\n#t\n".encode()
    )
    done = cli("journal", "check", "--json", "--root", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    kinds = {(p["kind"], p["line"]) for p in json.loads(done.stdout)["problems"]}
    assert ("bad_date", 1) in kinds and ("control_char", 8) in kinds
