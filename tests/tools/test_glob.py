"""Glob through rg --files: shell-like patterns, newest first, .gitignore, cap, confinement."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolContext, ToolResult
from journal_agent.tools.glob import MAX_RESULTS, Glob
from journal_agent.tools.permissions import PermissionPolicy


@pytest.fixture
def repo(ws: Path) -> Path:
    for rel in ["a.py", "README.md", "src/b.py", "src/pkg/c.py", "src/pkg/d.txt",
                "build/out.py", ".github/ci.yml", "my dir/e.py"]:  # fmt: skip
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x\n")
    (ws / ".gitignore").write_text("build/\n")
    return ws


def glob(ws: Path, policy: PermissionPolicy | None = None, **params: object) -> ToolResult:
    return Glob().call(ToolContext(root=ws, policy=policy or PermissionPolicy(ws)), params)


def names(res: ToolResult) -> list[str]:
    assert not res.is_error, res.content
    return sorted(res.content.splitlines())


def test_schema() -> None:
    schema = Glob.input_schema()
    assert list(schema["properties"]) == ["pattern", "path"]
    assert schema["required"] == ["pattern"]
    assert schema["properties"]["path"] == {
        "description": schema["properties"]["path"]["description"],
        "type": "string",
    }


def test_double_star_recurses_and_gitignore_is_respected(repo: Path) -> None:
    assert names(glob(repo, pattern="**/*.py")) == ["a.py", "my dir/e.py", "src/b.py",
                                                    "src/pkg/c.py"]  # fmt: skip


def test_a_pattern_without_slash_matches_only_the_directory_itself(repo: Path) -> None:
    assert names(glob(repo, pattern="*.py")) == ["a.py"]
    assert names(glob(repo, pattern="*.py", path="src")) == ["src/b.py"]
    assert names(glob(repo, pattern="src/**/*.py")) == ["src/b.py", "src/pkg/c.py"]
    assert names(glob(repo, pattern="src/*/*.{py,txt}")) == ["src/pkg/c.py", "src/pkg/d.txt"]


def test_hidden_directories_are_found(repo: Path) -> None:
    assert names(glob(repo, pattern="**/*.yml")) == [".github/ci.yml"]


def test_absolute_pattern_inside_the_workspace(repo: Path) -> None:
    assert names(glob(repo, pattern=f"{repo}/src/*.py")) == ["src/b.py"]


def test_newest_first(repo: Path) -> None:
    now = time.time()
    for i, rel in enumerate(["src/pkg/c.py", "a.py", "src/b.py", "my dir/e.py"]):
        os.utime(repo / rel, (now - 100 * i, now - 100 * i))
    res = glob(repo, pattern="**/*.py")
    assert res.content.splitlines() == ["src/pkg/c.py", "a.py", "src/b.py", "my dir/e.py"]


def test_results_are_capped_with_a_note(ws: Path) -> None:
    for i in range(MAX_RESULTS + 20):
        (ws / f"f{i:03}.txt").write_text("")
    lines = glob(ws, pattern="*.txt").content.splitlines()
    assert len([ln for ln in lines if ln.endswith(".txt")]) == MAX_RESULTS
    assert f"of {MAX_RESULTS + 20} files" in lines[-1]


def test_no_match(repo: Path) -> None:
    assert glob(repo, pattern="**/*.rs").content == "No files found"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pattern": "*", "path": ".."}, "outside the workspace"),
        ({"pattern": "*", "path": "/etc"}, "outside the workspace"),
        ({"pattern": "../*"}, "'..'"),
        ({"pattern": "/etc/*"}, "outside the search directory"),
        ({"pattern": "*", "path": "nope"}, "does not exist"),
        ({"pattern": "*", "path": "a.py"}, "not a directory"),
        ({"pattern": "[", "path": "src"}, "Invalid glob pattern"),
    ],
)
def test_errors(repo: Path, params: dict[str, str], message: str) -> None:
    res = glob(repo, **params)
    assert res.is_error and message in res.content


def test_symlinked_directory_out_is_refused(repo: Path, outside: Path) -> None:
    os.symlink(outside, repo / "escape")
    res = glob(repo, pattern="*", path="escape")
    assert res.is_error and "outside the workspace" in res.content
    assert "secret.txt" not in glob(repo, pattern="**/*.txt").content


def test_read_deny_rules_hide_files(repo: Path) -> None:
    policy = PermissionPolicy(repo, deny=["Read(./src/pkg/**)"])
    assert names(glob(repo, policy, pattern="**/*.py")) == ["a.py", "my dir/e.py", "src/b.py"]


@pytest.mark.parametrize("params", [{"pattern": "*\x00"}, {"pattern": "*", "path": "src\x00"}])
def test_nul_bytes_are_an_error_not_a_crash(repo: Path, params: dict[str, str]) -> None:
    res = glob(repo, **params)
    assert res.is_error and "NUL byte" in res.content


def test_a_pattern_naming_an_ignored_file_does_not_list_it(tmp_path: Path) -> None:
    # rg's --glob overrides .gitignore for files; the tool must still respect it.
    (tmp_path / ".gitignore").write_text("*.log\nsecret_notes.md\n")
    (tmp_path / "app.log").write_text("x\n")
    (tmp_path / "secret_notes.md").write_text("x\n")
    (tmp_path / "notes.md").write_text("x\n")
    ctx = ToolContext(root=tmp_path)
    assert Glob().call(ctx, {"pattern": "*.log"}).content == "No files found"
    assert Glob().call(ctx, {"pattern": "**/*.md"}).content == "notes.md"
    assert Glob().call(ctx, {"pattern": "*_notes.md"}).content == "No files found"


GLOB_SYNTAX = [
    "**/*.py", "*.py", "src/**", "src/*", "src/**/*.py", "**/deep/*", "**", "*", "*/*.md",
    "src/{a,b}.*", "**/*.{ts,tsx}", "**/[ab].py", "**/[!ab].py", "**/?.py", "x y/*",
    "**/\\[x\\].py", "**.py", "**/a,b.js", "lib/**/src/*.txt", "**/.dot.py", "{src,lib}/**/a.py",
    "*/**/*.ts", "**/*/*.txt", "src/pkg*/*", "[a-z]*/*.md",
]  # fmt: skip


def test_glob_syntax_matches_what_rg_glob_matches(tmp_path: Path) -> None:
    # Glob matches on rg's listing itself (rg's --glob would override .gitignore): it must
    # agree with rg's own glob matching on every kind of pattern.
    import subprocess

    from journal_agent.tools._rg import rg_binary

    names = ["a.py", "b.md", "c.txt", ".dot.py", "s p.py", "[x].py", "a,b.js", "a.ts", "a.tsx"]
    for d in ["", "src", "src/pkg", "src/pkg/deep", "x y", "lib", "lib/src", "docs"]:
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        for name in names:
            (tmp_path / d / name).write_text("x\n")
    rg = [rg_binary(), "--files", "--hidden", "--no-config"]
    ctx = ToolContext(root=tmp_path)
    for pattern in GLOB_SYNTAX:
        anchored = pattern if pattern.startswith("**") else "/" + pattern
        expected = subprocess.run(
            [*rg, "--glob", anchored], cwd=tmp_path, capture_output=True, text=True
        ).stdout.splitlines()
        got = Glob().call(ctx, {"pattern": pattern}).content.splitlines()
        assert sorted(got) == sorted(expected) or (got == ["No files found"] and not expected), (
            pattern
        )
