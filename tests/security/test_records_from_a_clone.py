"""A repository can commit `.journal/measurements/meas-….json`: `git clone` brings a "measured"
record holding whatever numbers its author liked. Such a record is never taken for this user's
measurement (docs/security.md, "Records from elsewhere"): every record our code saves carries
this user's seal (profiling/_seal.py, a key outside every workspace, hidden in the sandbox);
one without a seal that verifies is listed as made elsewhere, and an entry citing it is refused
until the user adopts it on their own terminal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from journal_agent.journal import api
from journal_agent.paths import measurements_dir
from journal_agent.workspace import Workspace
from profiling import _seal
from profiling.records import MeasurementRecord, Quantity, RecordStore
from tests.entries import render_entry

FORGED_ID = "meas-c0ffee00"


def _record(record_id: str = FORGED_ID, gib: float = 3.0, **extra) -> MeasurementRecord:
    return MeasurementRecord(
        id=record_id,
        kind="measured",
        title="A100 peak, llama-7b LoRA",
        results=[Quantity(name="peak", value=gib * 2**30, unit="B")],
        extra=extra,
    )


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)  # fmt: skip


def _draft(root: Path, record_id: str, gib: str) -> Path:
    entry = render_entry(
        "Peak of a LoRA step", "2026-11-29", context="Measured on the A100.",
        question="How much memory does the step take?",
        intuition=f"The step peaked at {gib} GiB [m:{record_id}].", tags="#memory",
    )  # fmt: skip
    draft = root / "draft.md"
    draft.write_text(entry, encoding="utf-8")
    return draft


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A real clone of a repository that committed a record of its own, sealed with its
    author's key (another XDG_CONFIG_HOME) as well as one with no seal at all."""
    origin = tmp_path / "origin"
    folder = measurements_dir(origin)
    folder.mkdir(parents=True)
    unsealed = _record().model_dump(mode="json")
    (folder / f"{FORGED_ID}.json").write_text(json.dumps(unsealed, indent=2))
    (origin / "README.md").write_text("a project\n")
    _git(origin, "init", "-q")
    _git(origin, "add", "-A")
    _git(origin, "commit", "-qm", "records")
    ws = tmp_path / "ws"
    _git(tmp_path, "clone", "-q", str(origin), str(ws))
    assert (measurements_dir(ws) / f"{FORGED_ID}.json").is_file()
    return ws


def test_a_cloned_record_is_listed_as_made_elsewhere(clone, cli):
    RecordStore(measurements_dir(clone)).save(_record("meas-0000aaaa", 1.0))  # one of ours
    rows = {
        r["id"]: r["made_here"] for r in cli.json("measurements", "--json", "--root", str(clone))
    }
    assert rows == {FORGED_ID: False, "meas-0000aaaa": True}
    listed = cli("measurements", "--root", str(clone))
    assert "elsewhere" in listed.stdout
    assert "1 of these were not made by your journal-agent" in " ".join(listed.stdout.split())
    shown = cli("measurements", "show", FORGED_ID, "--root", str(clone))
    assert "was not made by your journal-agent" in " ".join(shown.stdout.split())


def test_the_views_record_page_says_where_a_record_was_made(clone):
    from journal_agent.view.pages import Mode, Pages
    from journal_agent.view.site import Site

    RecordStore(measurements_dir(clone)).save(_record("meas-0000aaaa", 1.0))
    pages = Pages(Site(Workspace(clone)), Mode(live=False))
    theirs = " ".join(pages.record(FORGED_ID).split())
    assert "<strong>elsewhere</strong>: not made by your journal-agent" in theirs
    assert f"journal-agent measurements adopt {FORGED_ID}" in theirs
    ours = " ".join(pages.record("meas-0000aaaa").split())
    assert "by your journal-agent" in ours and "elsewhere" not in ours


def test_an_entry_citing_a_cloned_record_is_refused_and_the_journal_kept(clone, cli):
    journal = clone / "learning_journal.md"
    before = journal.read_bytes() if journal.exists() else None
    done = cli(
        "journal", "append", "--file", str(_draft(clone, FORGED_ID, "3")), "--root", str(clone)
    )
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())
    assert f"[m:{FORGED_ID}] was not made by your journal-agent" in said
    assert "Traceback" not in said
    assert (journal.read_bytes() if journal.exists() else None) == before
    # Committed in the journal itself, `journal check` names it too.
    journal.write_text("# Learning Journal\n\n" + _draft(clone, FORGED_ID, "3").read_text())
    problems = api.check(Workspace(clone)).problems
    assert any(p.kind == "bad_citation" and "not made by your" in p.detail for p in problems)


def test_a_record_of_ours_is_cited_as_before(clone, cli):
    RecordStore(measurements_dir(clone)).save(_record("meas-0000bbbb", 3.0))
    done = cli("journal", "append", "--file", str(_draft(clone, "meas-0000bbbb", "3")),
               "--root", str(clone))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[m:meas-0000bbbb]" in (clone / "learning_journal.md").read_text()


def test_a_seal_copied_or_made_with_another_key_does_not_verify(clone, tmp_path, monkeypatch):
    store = RecordStore(measurements_dir(clone))
    store.save(_record("meas-0000cccc", 3.0))
    ours = store.load("meas-0000cccc")
    assert _seal.sealed_here(ours)
    # The repository's author changes a number of a record we sealed, keeping the seal.
    raised = ours.model_copy(deep=True)
    raised.results[0].value *= 2
    assert not _seal.sealed_here(raised)
    # The same record sealed by another user's key (the repository's author).
    theirs = _record("meas-0000dddd", 3.0)
    with monkeypatch.context() as m:
        m.setenv("XDG_CONFIG_HOME", str(tmp_path / "author-config"))
        assert _seal.seal(theirs)
    assert not _seal.sealed_here(theirs)
    # A key file planted as a link is no key: nothing verifies, nothing is written through it.
    target = tmp_path / "elsewhere.key"
    target.write_text("0" * 64 + "\n")
    key = _seal.key_path()
    key.unlink()
    key.symlink_to(target)
    assert not _seal.sealed_here(ours)
    assert not _seal.seal(_record("meas-0000eeee"))
    assert target.read_text() == "0" * 64 + "\n"


def test_the_key_is_the_users_alone_and_lives_beside_the_trust_store():
    from journal_agent.trust_store import store_dir

    assert _seal.seal(_record())
    assert str(_seal.key_dir()) == store_dir()
    assert _seal.key_path().stat().st_mode & 0o777 == 0o600


def test_adopting_needs_the_users_terminal(clone, cli):
    # Run as a tool call would run it (no terminal): refused, the record stays made elsewhere.
    done = cli.process("measurements", "adopt", FORGED_ID, "--root", str(clone))
    assert done.returncode == 1
    assert "terminal" in done.stderr
    record = RecordStore(measurements_dir(clone)).load(FORGED_ID)
    assert not _seal.sealed_here(record)


@pytest.mark.parametrize(("mode", "allow"), [("default", ("Bash",)), ("bypassPermissions", ())])
def test_no_command_reads_the_key_to_seal_a_forgery(lab, monkeypatch, mode, allow):
    # The key where a user's is (under their home, not /tmp, which the sandbox hides anyway).
    monkeypatch.setenv("XDG_CONFIG_HOME", str(lab.home / ".config"))
    assert _seal.seal(_record())
    key = _seal.key_path()
    secret = key.read_text().strip()
    # In a script, so that no rule reading the command line stands in the way: only the sandbox.
    (lab.ws / "peek.sh").write_text(f"cat {key}; od -An -c {key} | head -2; echo done\n")
    res = lab.bash("sh peek.sh", mode, allow)
    assert "done" in res.stdout, res.stdout + res.stderr
    assert secret not in res.stdout + res.stderr
    assert secret[:16] not in "".join(res.stdout.split())
