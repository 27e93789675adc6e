"""Grep through the real rg binary: modes, filters, paging, .gitignore, confinement, errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_agent.tools.base import ToolContext, ToolResult
from journal_agent.tools.grep import Grep
from journal_agent.tools.permissions import PermissionPolicy


@pytest.fixture
def repo(ws: Path) -> Path:
    files = {
        "src/train.py": "import torch\n\ndef step(model):\n    loss = model()\n    return loss\n",
        "src/eval.py": "def evaluate(model):\n    return model.eval()\n",
        "src/util/io.py": "def load(path):\n    return open(path).read()\n",
        "docs/guide.md": "# Guide\nCall step(model) each iteration.\n",
        "build/generated.py": "def step(): pass\n",
        ".gitignore": "build/\n",
        ".env": "API_KEY=def step-secret\n",
        "-dash.txt": "--flag looks like an option\n",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


def grep(ws: Path, policy: PermissionPolicy | None = None, **params: object) -> ToolResult:
    ctx = ToolContext(root=ws, policy=policy or PermissionPolicy(ws))
    return Grep().call(ctx, params)


def test_schema_uses_claude_code_field_names() -> None:
    schema = Grep.input_schema()
    assert list(schema["properties"]) == [
        "pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C",
        "head_limit", "offset", "multiline",
    ]  # fmt: skip
    assert schema["required"] == ["pattern"]
    assert schema["properties"]["-n"]["default"] is True
    assert schema["properties"]["output_mode"]["enum"] == ["content", "files_with_matches", "count"]


def test_files_with_matches_is_the_default_newest_first_and_relative(repo: Path) -> None:
    old = time.time() - 100
    os.utime(repo / "src/train.py", (old, old))
    res = grep(repo, pattern=r"def \w+\(model")
    assert not res.is_error
    assert res.content.splitlines() == ["Found 2 files", "src/eval.py", "src/train.py"]


def test_gitignored_files_and_secrets_are_not_searched(repo: Path) -> None:
    res = grep(repo, pattern="step")
    assert "build/generated.py" not in res.content
    assert ".env" not in res.content
    assert "src/train.py" in res.content


def test_content_mode_with_line_numbers_and_context(repo: Path) -> None:
    res = grep(repo, pattern="loss =", output_mode="content", path="src")
    assert res.content == "src/train.py:4:    loss = model()"
    res = grep(repo, pattern="loss =", output_mode="content", **{"-C": 1})
    assert res.content.splitlines() == [
        "src/train.py-3-def step(model):",
        "src/train.py:4:    loss = model()",
        "src/train.py-5-    return loss",
    ]
    res = grep(repo, pattern="loss =", output_mode="content", **{"-n": False, "-B": 1})
    assert res.content.splitlines() == [
        "src/train.py-def step(model):",  # a context line, as rg -N marks it
        "src/train.py:    loss = model()",
    ]


def test_case_insensitive_glob_and_type(repo: Path) -> None:
    assert "Found 1 file" in grep(repo, pattern="GUIDE", **{"-i": True}).content
    assert grep(repo, pattern="GUIDE").content == "No files found"
    res = grep(repo, pattern="model", glob="*.md")
    assert res.content.splitlines()[1:] == ["docs/guide.md"]
    res = grep(repo, pattern="model", type="py")
    assert "docs/guide.md" not in res.content and "src/train.py" in res.content
    res = grep(repo, pattern="def", glob="src/util/**")
    assert res.content.splitlines()[1:] == ["src/util/io.py"]


def test_count_mode(repo: Path) -> None:
    res = grep(repo, pattern="model", output_mode="count", path="src")
    lines = res.content.splitlines()
    assert lines[:2] == ["src/eval.py:2", "src/train.py:2"]
    assert lines[-1] == "Found 4 total occurrences across 2 files."


def test_multiline(repo: Path) -> None:
    res = grep(repo, pattern=r"def step\(model\):\n\s+loss", output_mode="content")
    assert res.content == "No matches found"
    res = grep(repo, pattern=r"def step\(model\):\n\s+loss", output_mode="content", multiline=True)
    assert res.content.splitlines() == [
        "src/train.py:3:def step(model):",
        "src/train.py:4:    loss = model()",
    ]


def test_a_pattern_starting_with_a_dash_is_a_pattern(repo: Path) -> None:
    res = grep(repo, pattern="--flag", output_mode="content")
    assert res.content == "-dash.txt:1:--flag looks like an option"


def test_head_limit_and_offset_page_through_results(ws: Path) -> None:
    (ws / "many.txt").write_text("".join(f"hit {i}\n" for i in range(300)))
    res = grep(ws, pattern="hit", output_mode="content")
    lines = res.content.splitlines()
    assert lines[0] == "many.txt:1:hit 0" and "many.txt:250:hit 249" in lines
    assert "many.txt:251:hit 250" not in lines
    assert "Use offset=250" in res.content
    res = grep(ws, pattern="hit", output_mode="content", offset=250, head_limit=0)
    lines = res.content.splitlines()
    assert lines[0] == "many.txt:251:hit 250" and lines[-1] == "many.txt:300:hit 299"
    assert "offset=" not in res.content
    res = grep(ws, pattern="hit", output_mode="content", head_limit=2, offset=10)
    assert res.content.splitlines()[:2] == ["many.txt:11:hit 10", "many.txt:12:hit 11"]


def test_file_listing_pages_too(ws: Path) -> None:
    for i in range(5):
        (ws / f"f{i}.txt").write_text("x\n")
    res = grep(ws, pattern="x", head_limit=2)
    assert res.content.startswith("Found 5 files")
    assert "Showing files 1-2 of 5" in res.content and "offset=2" in res.content


def test_invalid_regex_is_a_clear_error(repo: Path) -> None:
    res = grep(repo, pattern="step(")
    assert res.is_error
    assert "Invalid regular expression" in res.content and "unclosed group" in res.content


def test_unknown_type_is_a_clear_error(repo: Path) -> None:
    res = grep(repo, pattern="x", type="pythn")
    assert res.is_error and "unrecognized file type" in res.content


@pytest.mark.parametrize("path", ["..", "/etc", "../outside", "src/../../outside"])
def test_paths_outside_the_workspace_are_refused(repo: Path, outside: Path, path: str) -> None:
    res = grep(repo, pattern="TOPSECRET", path=path)
    assert res.is_error and "outside the workspace" in res.content


def test_a_symlink_out_is_not_followed(repo: Path, outside: Path) -> None:
    os.symlink(outside, repo / "escape")
    res = grep(repo, pattern="TOPSECRET", output_mode="content")
    assert "TOPSECRET-outside" not in res.content
    res = grep(repo, pattern="TOPSECRET", path="escape")
    assert res.is_error and "outside the workspace" in res.content


def test_read_deny_rules_hide_files_and_refuse_paths(repo: Path) -> None:
    policy = PermissionPolicy(repo, deny=["Read(./src/util/**)"])
    res = grep(repo, policy, pattern="def", output_mode="content")
    assert "src/util/io.py" not in res.content and "src/eval.py" in res.content
    assert grep(repo, policy, pattern="def", path="src/util").content == "No files found"
    res = grep(repo, policy, pattern="def", path="src/util/io.py")
    assert res.is_error and "denied by the rule Read(./src/util/**)" in res.content


def test_a_secret_is_searchable_when_an_allow_rule_names_it(repo: Path) -> None:
    policy = PermissionPolicy(repo, allow=["Read(./.env)"])
    assert ".env" in grep(repo, policy, pattern="API_KEY").content


def test_huge_results_stay_within_the_token_budget(ws: Path) -> None:
    (ws / "big.txt").write_text(("needle " + "x" * 400 + "\n") * 3000)
    res = grep(ws, pattern="needle", output_mode="content", head_limit=0)
    assert "Result truncated" in res.content and "head_limit" in res.content
    assert len(res.content) < 25_000 * 8


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pattern=st.text(min_size=1, max_size=20),
    glob_=st.one_of(st.none(), st.text(max_size=10)),
    mode=st.sampled_from(["content", "files_with_matches", "count"]),
)
def test_any_input_gives_a_result_never_a_crash(
    repo: Path, pattern: str, glob_: str | None, mode: str
) -> None:
    params: dict[str, object] = {"pattern": pattern, "output_mode": mode}
    if glob_ is not None:
        params["glob"] = glob_
    res = grep(repo, **params)
    assert isinstance(res.content, str) and res.content
    assert "API_KEY" not in res.content  # the secret never shows, whatever the pattern


def test_glob_does_not_bring_back_ignored_files(tmp_path: Path) -> None:
    # rg's --glob overrides .gitignore for files; the tool must still respect it.
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "app.log").write_text("needle\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kept.txt").write_text("needle\n")
    ctx = ToolContext(root=tmp_path)
    for mode in ("files_with_matches", "content", "count"):
        res = Grep().call(ctx, {"pattern": "needle", "glob": "*.{log,txt}", "output_mode": mode})
        assert "sub/kept.txt" in res.content and "app.log" not in res.content, res.content
    # An explicitly named file is searched, as with rg itself.
    res = Grep().call(ctx, {"pattern": "needle", "glob": "*.log", "path": "app.log"})
    assert "app.log" in res.content


def test_without_line_numbers_context_lines_still_differ_from_matches(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n12:def g():\n")
    ctx = ToolContext(root=tmp_path)
    res = Grep().call(ctx, {"pattern": "def", "output_mode": "content", "-n": False, "-C": 1})
    assert res.content == "a.py:def f():\na.py-    return 1\na.py:12:def g():"


def test_count_totals_cover_every_file_not_just_the_page(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("hit\n" * (i + 1))
    ctx = ToolContext(root=tmp_path)
    res = Grep().call(ctx, {"pattern": "hit", "output_mode": "count", "head_limit": 2})
    assert res.content.splitlines()[:2] == ["f0.txt:1", "f1.txt:2"]
    assert "Found 15 total occurrences across 5 files." in res.content
    assert "offset=2" in res.content
