"""The feedback loop sees every edit, whoever made it (issue #24): eject records the baseline,
an edit by Claude Code's Edit tool or the user's editor (a plain write here: nothing of ours
runs) is recorded with the next feedback, revert works, and the command the user runs is the
improved file."""

from __future__ import annotations

import json
import shutil

from journal_agent.paths import plugin_root

OLD = '**Action**: Add "🎯 Practice Exercise" section with verification steps'
NEW = OLD + " (this user asked for it: always add one)"


def _editor(path, old: str, new: str) -> None:
    """Another hand edits the file: no Read/Edit of ours, no history kept."""
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_an_edit_by_any_hand_is_recorded_and_reverted(ws, cli):
    eject = cli("commands", "--eject", "learn", cwd=ws)
    assert eject.returncode == 0, eject.stderr
    learn = ws / ".claude" / "commands" / "learn.md"
    ejected = learn.read_bytes()

    _editor(learn, OLD, NEW)
    first = cli("feedback", "Practice problems, please", "--file", "learn", cwd=ws)
    assert first.returncode == 0, first.stderr
    assert "(+1 -1;" in first.stdout  # not "+0 −0, has not changed"
    diff = cli("feedback", "--diff", "1", cwd=ws).stdout
    assert f"-{OLD}\n" in diff and f"+{NEW}\n" in diff

    # A second edit by the user's editor after that record: exactly that change is the next one.
    _editor(learn, "### Track Learning Patterns:", "### Track Learning Patterns (weekly):")
    second = json.loads(cli("feedback", "Weekly is enough", "--json", cwd=ws).stdout)
    assert (second["n"], second["added"], second["removed"]) == (2, 1, 1)
    diff = cli("feedback", "--diff", "2", cwd=ws).stdout
    assert "+### Track Learning Patterns (weekly):" in diff and NEW not in diff.replace(
        " " + NEW, ""
    )

    assert cli("feedback", "--revert", "1", cwd=ws).returncode == 0
    assert learn.read_bytes() == ejected


def test_a_copy_ejected_without_a_baseline_is_compared_with_the_plugins_file(ws, cli):
    # Ejected by hand (or by a version that kept no baseline).
    learn = ws / ".claude" / "commands" / "learn.md"
    learn.parent.mkdir(parents=True)
    shutil.copyfile(plugin_root() / "commands" / "learn.md", learn)
    _editor(learn, OLD, NEW)
    done = json.loads(cli("feedback", "Practice problems", "--json", cwd=ws).stdout)
    assert (done["added"], done["removed"]) == (1, 1)
    assert cli("feedback", "--revert", "1", cwd=ws).returncode == 0
    assert learn.read_bytes() == (plugin_root() / "commands" / "learn.md").read_bytes()


def test_the_command_the_user_runs_is_the_improved_file(ws, cli):
    eject = cli("commands", "--eject", "learn", cwd=ws)
    # Claude Code runs a project command as /learn; the plugin's /journal-agent:learn is the
    # original. Here `journal-agent learn` runs the project's copy.
    assert "/learn in Claude Code (/journal-agent:learn stays the plugin's original)" in (
        eject.stdout
    )
    assert '`journal-agent learn "…"` here' in eject.stdout
    _editor(ws / ".claude" / "commands" / "learn.md", OLD, NEW)
    request = cli("learn", "--dry-run", "ZeRO stage 2", cwd=ws)
    assert request.returncode == 0, request.stderr
    assert "this user asked for it: always add one" in request.stdout
    listed = cli("commands", "--json", cwd=ws).stdout
    learn = next(c for c in json.loads(listed)["commands"] if c["name"] == "learn")
    assert learn["origin"] == "project"
