"""A secret committed to git stays readable from the object store (``git show HEAD:.env``):
the sandbox hides the file, not its history. ``journal-agent doctor`` says which hidden paths
a commit holds, what that means and what to do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.trust_helpers import approve

NAME = "secrets in git history"


def git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   cwd=ws, check=True, capture_output=True)  # fmt: skip


def history_check(cli, ws: Path, home: Path) -> dict[str, object]:
    checks = cli.json("doctor", "--root", str(ws), home=home)
    return next(c for c in checks if c["name"] == NAME)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "config").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    git(ws, "init", "-q")
    (ws / "train.py").write_text("print('hi')\n")
    (ws / ".env.example").write_text("API_KEY=<your key>\n")  # an exception: never hidden
    git(ws, "add", ".")
    git(ws, "commit", "-qm", "code")
    return ws


def test_a_clean_history_is_ok(cli, repo):
    (repo / ".env").write_text("API_KEY=sk-ant-api03-notcommitted\n")  # present, never committed
    check = history_check(cli, repo, repo.parent / "home")
    assert check["ok"] is True and "no file the sandbox hides" in check["detail"]


def test_secrets_once_committed_are_named_with_what_it_means_and_what_to_do(cli, repo):
    (repo / ".env").write_text("API_KEY=sk-ant-api03-committed\n")
    (repo / "config/server.key").write_text("KEY\n")
    git(repo, "add", "-f", ".env", "config/server.key")
    git(repo, "commit", "-qm", "oops")
    git(repo, "rm", "-q", "--cached", ".env", "config/server.key")
    git(repo, "commit", "-qm", "remove them")  # gone from HEAD, not from history
    check = history_check(cli, repo, repo.parent / "home")
    detail = str(check["detail"])
    assert check["ok"] is False
    assert detail.startswith(".env, config/server.key are in this repository's history")
    assert ".env.example" not in detail and "train.py" not in detail
    assert "hides the file, not its history" in detail
    assert "filter-repo" in detail and "rotate" in detail


def test_a_secret_on_another_branch_and_a_deny_read_name_count_too(cli, repo):
    git(repo, "checkout", "-qb", "side")
    (repo / "private.dat").write_text("x\n")
    (repo / ".claude").mkdir()
    (repo / ".claude/settings.json").write_text('{"sandbox": {"filesystem": '
                                                '{"denyRead": ["*.dat"]}}}')  # fmt: skip
    approve(repo)
    git(repo, "add", "private.dat")
    git(repo, "commit", "-qm", "side")
    git(repo, "checkout", "-q", "-")
    check = history_check(cli, repo, repo.parent / "home")
    assert check["ok"] is False and str(check["detail"]).startswith("private.dat is in")


def test_outside_a_repository_there_is_nothing_to_check(cli, tmp_path):
    (tmp_path / "ws").mkdir()
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    checks = cli.json("doctor", "--root", str(tmp_path / "ws"), env=env)
    check = next(c for c in checks if c["name"] == NAME)
    assert check["ok"] is True and "not a git repository" in check["detail"]


def test_a_secret_added_only_by_a_merge_commit_counts_too(cli, repo):
    git(repo, "checkout", "-qb", "side")
    (repo / "notes.md").write_text("side\n")
    git(repo, "add", "notes.md")
    git(repo, "commit", "-qm", "side")
    git(repo, "checkout", "-q", "-")
    git(repo, "merge", "-q", "--no-ff", "--no-commit", "side")
    (repo / ".env").write_text("API_KEY=sk-ant-api03-merged\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-qm", "merge side")  # .env is in no parent: only the merge adds it
    check = history_check(cli, repo, repo.parent / "home")
    assert check["ok"] is False and str(check["detail"]).startswith(".env is in")
