"""A hard link to a secret, made before the call under an innocent name, shows nothing: the
sandbox masks every name of a masked file's inode that lies in the workspace."""

from __future__ import annotations

import os

import pytest

from tests.security.test_bash_attacks import IDS, SETUPS

# Files named one by one: the permission rules judge those by name and let them through, so it
# is the sandbox that must hide them. (`grep -r . docs` is refused before it runs: the rules'
# search filter knows the hard links too.)
READS = "cat notes.txt; cat docs/deep/key-backup.txt; grep -h . notes.txt docs/deep/*; cat pat.txt"


def link_secrets(lab) -> None:
    (lab.ws / "docs/deep").mkdir(parents=True)
    os.link(lab.ws / ".env", lab.ws / "notes.txt")
    os.link(lab.home / ".ssh/id_rsa", lab.ws / "docs/deep/key-backup.txt")


@pytest.mark.parametrize(("mode", "allow"), SETUPS, ids=IDS)
def test_a_hard_link_to_a_masked_file_shows_nothing(lab, mode, allow):
    link_secrets(lab)
    done = lab.bash(READS, mode, allow)
    lab.assert_no_secret(done.stdout + done.stderr)
    # pat.txt still reads. (This once failed twice under a loaded CI and never alone: the
    # message shows what the call answered, so the next failure says why.)
    assert "hello" in done.stdout or "needs approval" in done.stdout, done.stdout + done.stderr
    # The files themselves are untouched (and still the same inode).
    assert (lab.ws / "notes.txt").read_text().endswith(lab.SECRETS[0] + "\n")
    assert os.stat(lab.ws / "notes.txt").st_ino == os.stat(lab.ws / ".env").st_ino


def test_a_hard_link_to_a_masked_file_shows_nothing_through_the_cli(lab):
    link_secrets(lab)
    done = lab.bash(READS + "; cp notes.txt copy.txt; cat copy.txt", "bypassPermissions", cli=True)
    assert "hello" in done.stdout, done.stdout
    lab.assert_no_secret(done.stdout + done.stderr)
    assert not (lab.ws / "copy.txt").exists()  # the masked name cannot be read, so not copied


def test_a_link_made_after_an_earlier_call_is_masked_at_the_next(lab):
    """Masks are worked out at every call: the link need not exist when the session starts."""
    assert "hello" in lab.bash("cat pat.txt", "bypassPermissions").stdout
    os.link(lab.ws / ".env", lab.ws / "later.txt")
    done = lab.bash("cat later.txt pat.txt", "bypassPermissions")
    assert "hello" in done.stdout
    lab.assert_no_secret(done.stdout)


def file_tool(lab, tool: str, params: dict[str, object]):
    """Read or Grep as the model calls them (bypassPermissions: no rule asks first)."""
    from journal_agent.tools import builtin_tools, make_context

    return builtin_tools()[tool].call(make_context(lab.ws, mode="bypassPermissions"), params)


@pytest.mark.parametrize("rel", ["notes.txt", "docs/deep/key-backup.txt"])
def test_read_refuses_a_hard_link_to_a_hidden_file(lab, rel, monkeypatch):
    """Read runs outside the sandbox and judges by name: an innocent name of a hidden inode
    is refused too, with one sentence saying why and how to allow it."""
    monkeypatch.setenv("HOME", str(lab.home))  # where ~/.ssh/id_rsa lives
    link_secrets(lab)
    res = file_tool(lab, "Read", {"file_path": str(lab.ws / rel)})
    assert res.is_error and "hard link to a file hidden as a secret" in res.content
    assert f"Read(./{rel})" in res.content
    lab.assert_no_secret(res.content)
    assert "hello" in file_tool(lab, "Read", {"file_path": str(lab.ws / "pat.txt")}).content


@pytest.mark.parametrize("mode", ["content", "files_with_matches", "count"])
def test_grep_leaves_out_hard_links_to_hidden_files(lab, mode, monkeypatch):
    monkeypatch.setenv("HOME", str(lab.home))
    link_secrets(lab)
    (lab.ws / "ok.txt").write_text("ENVSECRET and PLUGH are words\n")
    for pattern in ("ENVSECRET", "PLUGH"):
        res = file_tool(lab, "Grep", {"pattern": pattern, "output_mode": mode})
        assert "ok.txt" in res.content, res.content
        assert "notes.txt" not in res.content and "key-backup" not in res.content
        lab.assert_no_secret(res.content)
