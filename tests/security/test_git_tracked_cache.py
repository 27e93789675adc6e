"""Whether git tracks the journal is kept per state of git's index (capture/git_tracked.py), so
the hooks do not search a 2-10 MB index at every tool call; a repository must not be able to
use that cache to make a clone's journal speak. Real repositories, real clones, the real hook.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from journal_agent.capture.git_tracked import CACHE, _cached, tracked
from journal_agent.capture.touch import TRACKED_NAMES, trusted

GIT = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "init.defaultBranch=main"]


def git(cwd: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


def project(root: Path) -> Path:
    (root / ".journal").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / "learning_journal.md").write_text("# Journal\n")
    (root / ".journal" / "refs.jsonl").write_text("")
    git(root, "init", "-q")
    git(root, "add", "src")
    git(root, "commit", "-q", "-m", "code")
    return root


def test_the_answer_is_kept_and_a_change_to_the_index_asks_again(tmp_path):
    root = project(tmp_path / "p")
    assert trusted(str(root))  # the journal is not tracked
    kept = (root / CACHE).read_text()
    index = (root / ".git" / "index").stat()
    assert kept.startswith(f"{index.st_dev}:{index.st_ino}:{index.st_size}:")
    assert kept.rstrip().endswith(" 0")
    git(root, "add", "learning_journal.md")  # now git tracks it: the same question, a new key
    assert not trusted(str(root))
    assert (root / CACHE).read_text().rstrip().endswith(" 1")
    assert not trusted(str(root))  # (from the cache)


def test_a_cache_a_repository_commits_cannot_make_its_clone_trusted(tmp_path):
    """The attack: the author runs the hook while the journal is untracked (the cache says
    'not tracked' for their index), then commits the journal and the cache. The clone's index
    is another file (inode, ctime): the kept answer is not taken, the clone stays silent."""
    origin = project(tmp_path / "origin")
    assert tracked(str(origin), TRACKED_NAMES) is False
    planted = (origin / CACHE).read_text()
    git(origin, "add", "-f", "learning_journal.md", ".journal")
    git(origin, "commit", "-q", "-m", "journal")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / CACHE).read_text() == planted  # the clone brought the cache
    assert not trusted(str(clone))
    assert (clone / CACHE).read_text() == planted  # tracked by git: never written over


def test_a_cache_older_than_the_index_is_not_taken(tmp_path):
    """Were a commit to guess the key (the clone's inode and times), its cache is still a file
    the checkout wrote before git wrote the index: an answer is taken only from a file whose
    ctime is not before the index's."""
    root = project(tmp_path / "p")
    assert trusted(str(root))
    cache = root / CACHE
    key = cache.read_text().split("\n")[0]
    written = cache.stat().st_ctime_ns
    assert _cached(str(root), key, written)  # written after the index: taken
    assert _cached(str(root), key, written + 1) == {}  # the index newer than it: not taken
    assert _cached(str(root), "another:key", written) == {}


def test_a_version_4_index_counts_as_tracking_the_journal(tmp_path):
    root = project(tmp_path / "p")
    git(root, "update-index", "--index-version", "4")
    assert not trusted(str(root))
