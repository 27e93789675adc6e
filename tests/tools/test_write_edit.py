"""Write and Edit: read-before-write, atomicity, modes, matching rules, optimistic concurrency."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from journal_agent.tools.permissions import PermissionPolicy


def read_ok(call, path: str, ctx=None) -> str:
    result = call("Read", ctx, file_path=path)
    assert not result.is_error, result.content
    return result.content


# -- Write ---------------------------------------------------------------------------------


def test_write_creates_a_new_file_and_its_parent_directories(ws: Path, call) -> None:
    result = call("Write", file_path="notes/2026/day.md", content="# Day\n\nhello\n")
    assert not result.is_error, result.content
    assert f"File created successfully at: {ws / 'notes/2026/day.md'}" in result.content
    assert (ws / "notes/2026/day.md").read_text() == "# Day\n\nhello\n"


def test_new_file_gets_the_usual_mode_not_the_temp_files_0600(ws: Path, call) -> None:
    old = os.umask(0o022)
    try:
        call("Write", file_path="new.md", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws / "new.md").stat().st_mode) == 0o644


def test_existing_file_must_be_read_before_write(ws: Path, call) -> None:
    (ws / "a.md").write_text("user's text\n")
    result = call("Write", file_path="a.md", content="agent's text\n")
    assert result.is_error
    assert "has not been read yet" in result.content
    assert "Read it first" in result.content
    assert (ws / "a.md").read_text() == "user's text\n"


def test_write_after_read_replaces_atomically_and_keeps_the_mode(ws: Path, call) -> None:
    target = ws / "run.sh"
    target.write_text("echo old\n")
    target.chmod(0o750)
    inode = target.stat().st_ino
    read_ok(call, "run.sh")
    result = call("Write", file_path="run.sh", content="echo new\n")
    assert not result.is_error, result.content
    assert "has been updated" in result.content
    assert target.read_text() == "echo new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.stat().st_ino != inode  # renamed into place, not rewritten in place
    assert sorted(p.name for p in ws.iterdir()) == [".journal", "run.sh"]  # no temp left


def test_lock_files_stay_under_dot_journal(ws: Path, call) -> None:
    call("Write", file_path="docs/a.md", content="x")
    assert [p.name for p in (ws / "docs").iterdir()] == ["a.md"]
    assert list((ws / ".journal" / "locks").glob("*.lock"))


def test_write_twice_in_one_run_needs_no_second_read(ws: Path, call) -> None:
    call("Write", file_path="a.md", content="one")
    assert not call("Write", file_path="a.md", content="two").is_error
    assert (ws / "a.md").read_text() == "two"


def test_write_over_a_file_changed_since_read_is_refused(ws: Path, call) -> None:
    (ws / "journal.md").write_text("v1\n")
    read_ok(call, "journal.md")
    (ws / "journal.md").write_text("v2 from the user's editor\n")
    result = call("Write", file_path="journal.md", content="agent\n")
    assert result.is_error
    assert "modified since read — Read it again" in result.content
    assert (ws / "journal.md").read_text() == "v2 from the user's editor\n"
    # After reading again, the write goes through.
    read_ok(call, "journal.md")
    assert not call("Write", file_path="journal.md", content="agent\n").is_error


def test_touching_a_file_without_changing_it_does_not_block_writes(ws: Path, call) -> None:
    (ws / "a.md").write_text("same\n")
    read_ok(call, "a.md")
    os.utime(ws / "a.md", ns=(1, 1))
    assert not call("Write", file_path="a.md", content="new\n").is_error


def test_file_created_by_someone_else_after_our_check_is_not_clobbered(
    ws: Path, call, make_ctx
) -> None:
    other = make_ctx()
    assert not call("Write", other, file_path="race.md", content="theirs\n").is_error
    result = call("Write", file_path="race.md", content="ours\n")
    assert result.is_error
    assert "has not been read yet" in result.content
    assert (ws / "race.md").read_text() == "theirs\n"


def test_file_deleted_since_read_is_reported(ws: Path, call) -> None:
    (ws / "a.md").write_text("x\n")
    read_ok(call, "a.md")
    (ws / "a.md").unlink()
    result = call("Write", file_path="a.md", content="y\n")
    assert result.is_error
    assert "deleted since you read it" in result.content
    assert not (ws / "a.md").exists()
    assert not call("Write", file_path="a.md", content="y\n").is_error  # told once, then allowed
    assert (ws / "a.md").read_text() == "y\n"


def test_write_through_an_inside_symlink_keeps_the_link(ws: Path, call) -> None:
    (ws / "real.md").write_text("old\n")
    (ws / "link.md").symlink_to("real.md")
    read_ok(call, "link.md")
    assert not call("Write", file_path="link.md", content="new\n").is_error
    assert (ws / "link.md").is_symlink()
    assert (ws / "real.md").read_text() == "new\n"


def test_write_to_a_directory_or_outside_is_refused(ws: Path, outside: Path, call) -> None:
    (ws / "src").mkdir()
    assert "is a directory" in call("Write", file_path="src", content="x").content
    result = call("Write", file_path=str(outside / "new.txt"), content="x")
    assert result.is_error
    assert not (outside / "new.txt").exists()


def test_plan_mode_refuses_writes(ws: Path, make_ctx, call) -> None:
    ctx = make_ctx(policy=PermissionPolicy(ws, mode="plan"))
    result = call("Write", ctx, file_path="a.md", content="x")
    assert result.is_error
    assert "plan mode" in result.content
    assert not (ws / "a.md").exists()


# -- Edit ----------------------------------------------------------------------------------


@pytest.fixture
def journal(ws: Path) -> Path:
    path = ws / "learning_journal.md"
    path.write_text("# Journal\n\n## Entry 1\nZeRO-1 shards optimizer state.\n\n## Entry 2\nTODO\n")
    return path


def test_edit_requires_a_read_first(journal: Path, call) -> None:
    result = call("Edit", file_path=journal.name, old_string="TODO", new_string="done")
    assert result.is_error
    assert "has not been read yet" in result.content
    assert "TODO" in journal.read_text()


def test_edit_replaces_the_unique_match_and_shows_a_numbered_snippet(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="TODO", new_string="FSDP shards all.")
    assert not result.is_error, result.content
    assert journal.read_text().endswith("## Entry 2\nFSDP shards all.\n")
    assert "7\tFSDP shards all." in result.content
    assert "6\t## Entry 2" in result.content
    assert result.content.endswith("7\tFSDP shards all.")  # no phantom line after the last


def test_edit_with_no_match_says_zero_matches(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="ZeRO-3", new_string="x")
    assert result.is_error
    assert "0 matches" in result.content


def test_edit_hints_when_line_number_prefixes_were_copied(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="7\tTODO", new_string="x")
    assert "line-number prefixes" in result.content


def test_edit_with_several_matches_says_how_many_and_changes_nothing(journal: Path, call) -> None:
    before = journal.read_text()
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="## Entry", new_string="### Entry")
    assert result.is_error
    assert "Found 2 matches" in result.content
    assert "replace_all" in result.content
    assert journal.read_text() == before


def test_replace_all_replaces_every_occurrence(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call(
        "Edit",
        file_path=journal.name,
        old_string="## Entry",
        new_string="### Note",
        replace_all=True,
    )
    assert not result.is_error, result.content
    assert "All 2 occurrences" in result.content
    assert journal.read_text().count("### Note") == 2
    assert "## Entry" not in journal.read_text()


def test_new_string_must_differ(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="TODO", new_string="TODO")
    assert result.is_error
    assert "exactly the same" in result.content


def test_edit_after_an_outside_change_is_refused_then_works_after_rereading(
    journal: Path, call
) -> None:
    read_ok(call, journal.name)
    journal.write_text(journal.read_text() + "\n## Entry 3 (by another agent)\n")
    result = call("Edit", file_path=journal.name, old_string="TODO", new_string="done")
    assert result.is_error
    assert "modified since read — Read it again" in result.content
    assert "TODO" in journal.read_text()
    read_ok(call, journal.name)
    assert not call("Edit", file_path=journal.name, old_string="TODO", new_string="done").is_error
    assert "## Entry 3 (by another agent)" in journal.read_text()


def test_consecutive_edits_in_one_run_need_no_rereading(journal: Path, call) -> None:
    read_ok(call, journal.name)
    assert not call("Edit", file_path=journal.name, old_string="TODO", new_string="A").is_error
    assert not call("Edit", file_path=journal.name, old_string="\nA\n", new_string="\nB\n").is_error
    assert journal.read_text().endswith("\nB\n")


def test_edit_of_a_crlf_file_keeps_crlf(ws: Path, call) -> None:
    path = ws / "win.txt"
    path.write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    read_ok(call, "win.txt")
    result = call("Edit", file_path="win.txt", old_string="alpha\nbeta", new_string="a\nb")
    assert not result.is_error, result.content
    assert path.read_bytes() == b"a\r\nb\r\ngamma\r\n"


def test_edit_keeps_bytes_that_are_not_utf8(ws: Path, call) -> None:
    path = ws / "mixed.txt"
    path.write_bytes(b"caf\xe9\nTODO\n")
    read_ok(call, "mixed.txt")
    assert not call("Edit", file_path="mixed.txt", old_string="TODO", new_string="done").is_error
    assert path.read_bytes() == b"caf\xe9\ndone\n"


def test_edit_with_empty_old_string_creates_a_file(ws: Path, call) -> None:
    result = call("Edit", file_path="new/file.md", old_string="", new_string="hello\n")
    assert not result.is_error, result.content
    assert (ws / "new/file.md").read_text() == "hello\n"


def test_edit_with_empty_old_string_on_a_non_empty_file_is_refused(journal: Path, call) -> None:
    read_ok(call, journal.name)
    result = call("Edit", file_path=journal.name, old_string="", new_string="x")
    assert result.is_error
    assert "old_string is empty" in result.content


def test_edit_of_a_missing_file_says_so(ws: Path, call) -> None:
    result = call("Edit", file_path="nope.md", old_string="a", new_string="b")
    assert result.is_error
    assert "File does not exist" in result.content


def test_edit_keeps_the_file_mode(journal: Path, call) -> None:
    journal.chmod(0o600)
    read_ok(call, journal.name)
    call("Edit", file_path=journal.name, old_string="TODO", new_string="done")
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600


def test_edit_denied_by_a_rule_changes_nothing(ws: Path, journal: Path, make_ctx, call) -> None:
    ctx = make_ctx(
        policy=PermissionPolicy(ws, mode="acceptEdits", deny=[f"Edit(./{journal.name})"])
    )
    read_ok(call, journal.name, ctx)
    result = call("Edit", ctx, file_path=journal.name, old_string="TODO", new_string="x")
    assert result.is_error
    assert "denied" in result.content
    assert "TODO" in journal.read_text()


def test_stale_run_cannot_overwrite_a_newer_write_by_another_run(
    journal: Path, call, make_ctx
) -> None:
    agent_a, agent_b = make_ctx(), make_ctx()
    read_ok(call, journal.name, agent_a)
    read_ok(call, journal.name, agent_b)
    assert not call(
        "Edit", agent_b, file_path=journal.name, old_string="TODO", new_string="B's note"
    ).is_error
    result = call("Write", agent_a, file_path=journal.name, content="A rewrote everything\n")
    assert result.is_error
    assert "modified since read" in result.content
    assert "B's note" in journal.read_text()


def test_partly_read_large_file_is_guarded_by_its_stat_identity(ws: Path, call) -> None:
    # Over 32 MB and read only at the top: no full hash, the stat identity decides.
    big = ws / "big.log"
    with open(big, "w") as f:
        f.write("HEADER\n")
        f.write(("filler " * 15 + "\n") * 320_000)
    assert big.stat().st_size > 32 << 20
    read_ok(call, "big.log")  # the first 2000 lines only
    assert not call("Edit", file_path="big.log", old_string="HEADER", new_string="TITLE").is_error
    with open(big, "a") as f:
        f.write("appended by someone else\n")
    result = call("Edit", file_path="big.log", old_string="TITLE", new_string="HEADER")
    assert "modified since read" in result.content
    assert big.read_text().startswith("TITLE\n")


def test_a_read_through_an_alias_counts_for_the_real_file(ws: Path, call) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "a.md").write_text("old\n")
    (ws / "alias").symlink_to("real")
    read_ok(call, "alias/a.md")
    assert not call(
        "Edit", file_path=str(ws / "real/a.md"), old_string="old", new_string="new"
    ).is_error
    assert (ws / "real" / "a.md").read_text() == "new\n"
