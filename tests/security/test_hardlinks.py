"""A hard link to a secret, made before the call under an innocent name, shows nothing: the
sandbox masks every name of a masked file's inode that lies in the workspace."""

from __future__ import annotations

import os

import pytest

from tests.security.test_bash_attacks import IDS, SETUPS

READS = "cat notes.txt; cat docs/deep/key-backup.txt; grep -r . docs notes.txt; cat pat.txt"


def link_secrets(lab) -> None:
    (lab.ws / "docs/deep").mkdir(parents=True)
    os.link(lab.ws / ".env", lab.ws / "notes.txt")
    os.link(lab.home / ".ssh/id_rsa", lab.ws / "docs/deep/key-backup.txt")


@pytest.mark.parametrize(("mode", "allow"), SETUPS, ids=IDS)
def test_a_hard_link_to_a_masked_file_shows_nothing(lab, mode, allow):
    link_secrets(lab)
    done = lab.bash(READS, mode, allow)
    lab.assert_no_secret(done.stdout + done.stderr)
    assert "hello" in done.stdout or "needs approval" in done.stdout  # pat.txt still reads
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
