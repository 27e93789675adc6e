"""The /learn feedback loop rewrites command files; every earlier version is kept."""

from __future__ import annotations

from journal_agent.tools._file_versions import history_dir


def test_edit_and_write_of_a_command_file_keep_the_previous_version(ws, call):
    cmd = ws / ".claude" / "commands" / "learn.md"
    cmd.parent.mkdir(parents=True)
    cmd.write_text("v1: make toy examples optional\n")
    assert not call("Read", file_path=str(cmd)).is_error
    assert not call(
        "Edit", file_path=str(cmd), old_string="optional", new_string="mandatory"
    ).is_error
    assert not call("Write", file_path=str(cmd), content="v3: rewritten\n").is_error
    kept = sorted((history_dir(ws) / ".claude" / "commands" / "learn.md").iterdir())
    assert [p.read_text() for p in kept] == [
        "v1: make toy examples optional\n",
        "v1: make toy examples mandatory\n",
    ]
    assert cmd.read_text() == "v3: rewritten\n"


def test_other_files_and_new_files_keep_no_history(ws, call):
    (ws / "notes.md").write_text("old\n")
    call("Read", file_path=str(ws / "notes.md"))
    call("Write", file_path=str(ws / "notes.md"), content="new\n")
    call("Write", file_path=str(ws / ".claude" / "agents" / "new.md"), content="x\n")
    assert not history_dir(ws).exists()
