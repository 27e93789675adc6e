"""The journal, the ledger and `.journal/` are written only by our code, in every mode (the
fourth review, high: `cp draft.md learning_journal.md` worked in acceptEdits and `>>` in
bypassPermissions, and `journal check` said nothing of the `sk-ant-` key the journal then held).

Now the sandbox binds them read-only for every Bash command, and a change any other hand makes
(an editor, git, a command without a sandbox) is found at the next read by content hash, said
in one sentence with what the secret scan found, and `journal check` names each secret.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from journal_agent.tools import builtin_tools, make_context
from tests.entries import render_entry
from tests.trust_helpers import approve

KEY = "sk-ant-api03-" + "Zq8xR2mT5vW9yB4nK7pL3sD6fG1hJ0cE" * 2 + "-AbCdEfGh"
# The worst case of each mode: every command allowed, so each one runs, writing.
MODES = [("default", ("Bash",)), ("acceptEdits", ("Bash",)), ("bypassPermissions", ())]
ATTACKS = {
    "cp": "cp draft.md learning_journal.md",
    "append": "cat draft.md >> learning_journal.md",
    "sed": "sed -i 's/Recompute/Forget/' learning_journal.md",
    "mv": "mv draft.md learning_journal.md",
    "rm": "rm -f learning_journal.md && cp draft.md learning_journal.md",
    "ledger": "cat draft.md >> learning_ledger.md",
    "python": "python3 -c \"open('learning_journal.md', 'a').write(open('draft.md').read())\"",
    "state": "cat draft.md >> .journal/appends.jsonl",
}


def _entry(title: str, intuition: str) -> str:
    return render_entry(
        title, "2026-11-20", context="Studying the trainer.", question="What is kept?",
        intuition=intuition, tags="#memory",
    )  # fmt: skip


@pytest.fixture
def journal(lab, cli, monkeypatch) -> Path:
    """A journal and a ledger our own commands wrote, and a draft holding a key."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (lab.ws / "entry.md").write_text(_entry("Activation checkpointing", "Recompute in backward."))
    cli("journal", "append", "--file", "entry.md", "--root", str(lab.ws), cwd=lab.ws, check=True)
    cli("ledger", "init", "--root", str(lab.ws), check=True)
    (lab.ws / "draft.md").write_text(f"\nANTHROPIC_API_KEY={KEY}\n")
    return lab.ws / "learning_journal.md"


@pytest.mark.parametrize(("mode", "allow"), MODES)
@pytest.mark.parametrize("attack", ATTACKS)
def test_bash_cannot_write_the_journal_ledger_or_state(lab, journal, mode, allow, attack):
    files = [journal, lab.ws / "learning_ledger.md", lab.ws / ".journal/appends.jsonl"]
    before = [p.read_bytes() for p in files]
    res = lab.bash(ATTACKS[attack], mode, allow)
    assert [p.read_bytes() for p in files] == before, res.stdout
    assert "Read-only file system" in res.stdout or "busy" in res.stdout, res.stdout


def test_our_own_commands_still_write_them_from_bash(lab, journal):
    (lab.ws / "second.md").write_text(_entry("Warm-up", "Warm-up keeps early steps small."))
    res = lab.bash("journal-agent journal append --file second.md", "acceptEdits")
    assert "Warm-up" in journal.read_text(), res.stdout
    assert "changed outside" not in res.stdout  # our own write: nothing to report


def test_another_hands_change_is_said_once_with_its_secret(lab, journal, cli):
    # An editor (or git, or a command without a sandbox) puts a key into the journal.
    journal.write_text(journal.read_text() + f"\nThe key: {KEY}\n")
    line = journal.read_text().splitlines().index(f"The key: {KEY}") + 1
    done = cli("journal", "list", "--root", str(lab.ws))
    assert done.returncode == 0
    assert (
        "note: learning_journal.md was changed outside journal-agent since it last wrote it"
        in done.stderr
    )
    assert (
        f"line {line} holds what looks like an Anthropic" in done.stderr and KEY not in done.stderr
    )
    again = cli("journal", "list", "--root", str(lab.ws))
    assert "changed outside" not in again.stderr  # said once
    # journal check names it, every time, until it is gone.
    check = cli("journal", "check", "--json", "--root", str(lab.ws))
    assert check.returncode == 1
    secrets = [p for p in json.loads(check.stdout)["problems"] if p["kind"] == "secret"]
    assert [p["line"] for p in secrets] == [line] and KEY not in check.stdout


def test_a_change_without_a_secret_is_said_too_and_the_tools_say_it(lab, journal):
    (lab.ws / "learning_ledger.md").write_text(
        (lab.ws / "learning_ledger.md").read_text() + "\n- edited by hand\n"
    )
    res = builtin_tools()["LedgerShow"].call(make_context(lab.ws), {})
    assert "learning_ledger.md was changed outside journal-agent" in res.content
    assert "no secret found in it" in res.content


def test_with_the_sandbox_off_a_commands_write_is_found_at_the_next_read(lab, journal, cli):
    # The user turned the sandbox off: Bash may write the journal, and the next read says so.
    (lab.ws / ".claude").mkdir()
    (lab.ws / ".claude/settings.json").write_text('{"sandbox": {"enabled": false}}')
    approve(lab.ws)
    lab.bash(ATTACKS["append"], "bypassPermissions")
    assert KEY in journal.read_text()
    res = builtin_tools()["JournalSearch"].call(make_context(lab.ws), {"query": "checkpointing"})
    assert "learning_journal.md was changed outside journal-agent" in res.content
    assert "holds what looks like an Anthropic" in res.content and KEY not in res.content
