"""Finding 2 of the third review: one own-journal command made the whole command line
writable. `journal-agent journal list; <anything>` in default mode ran `<anything>` with the
workspace and .journal/ writable. And the documented way to update the ledger from the
sandbox (`journal-agent ledger add-item …` through Bash) failed with a traceback.

Now an own command alone on its line is run by the host (isolated Python, our locked code
paths); beside anything else, the line gets the view its mode gives it, and the own command
gains nothing.
"""

from __future__ import annotations

import pytest

PLANTED = ("typer.py", "rich.py", "pydantic.py", "profiling.py", "journal_agent.py")

ATTACKS = [
    # git status is read-only: unasked in default mode, as the review found.
    "journal-agent journal list; GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
    "GIT_CONFIG_VALUE_0='touch pwned-fsmonitor .journal/pwned' git status",
    "journal-agent journal list; python3 -c \"import os; os.execvp('sh', ['sh', '-c', "
    "'touch pwned-exec .journal/pwned'])\"",
    "python -m journal_agent journal list && python3 -c \"import os; os.execvp('sh', "
    "['sh', '-c', 'touch pwned-exec .journal/pwned'])\"",
]


def _plant(lab) -> None:
    for name in PLANTED:
        (lab.ws / name).write_text(
            f"open({str(lab.outside / ('imported-' + name))!r}, 'w').write('x')\n"
        )


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize(("mode", "allow"), [("default", ()), ("plan", ("Bash",))])
def test_finding_02_an_own_command_does_not_widen_the_rest_of_the_line(lab, mode, allow, attack):
    (lab.ws / ".journal").mkdir(exist_ok=True)
    lab.bash(attack, mode, allow)
    assert not (lab.ws / "pwned-fsmonitor").exists()
    assert not (lab.ws / "pwned-exec").exists()
    assert not (lab.ws / ".journal/pwned").exists()
    lab.assert_nothing_outside()


def test_finding_02_own_commands_through_bash_work_and_run_only_our_code(lab):
    """`journal-agent ledger add-item …` through Bash in default mode updates the ledger (the
    host runs it), and modules planted in the workspace are never imported by it."""
    lab.cli.process("ledger", "init", "--root", str(lab.ws), cwd=lab.ws, home=lab.home)
    _plant(lab)
    res = lab.bash('journal-agent ledger add-item developing "**ZeRO-2**: shards gradients"')
    assert "item added" in res.stdout, res.stdout
    assert "**ZeRO-2**: shards gradients" in (lab.ws / "learning_ledger.md").read_text()
    res = lab.bash('python -m journal_agent ledger add-item blind "**FSDP**: unknown yet"')
    assert "item added" in res.stdout, res.stdout
    res = lab.bash("journal-agent estimate --model gpt2-small --json")
    assert '"record_id"' in res.stdout
    assert list((lab.ws / ".journal/measurements").glob("est-*.json"))
    assert sorted(p.name for p in lab.outside.iterdir()) == ["existing.txt"]


def test_finding_02_an_own_command_beside_others_says_why_it_cannot_write(lab):
    lab.cli.process("ledger", "init", "--root", str(lab.ws), cwd=lab.ws, home=lab.home)
    before = (lab.ws / "learning_ledger.md").read_text()
    res = lab.bash('journal-agent ledger add-item developing "**X**: y"; ls')
    assert "Traceback" not in res.stdout
    assert "run this journal-agent command alone on its Bash line" in res.stdout
    assert (lab.ws / "learning_ledger.md").read_text() == before


@pytest.mark.parametrize(
    "command",
    [
        "./journal-agent journal list",  # whatever the workspace holds under that name
        "PYTHONPATH=. journal-agent journal list",
        "env PYTHONSTARTUP=typer.py journal-agent journal list",
        "journal-agent journal list --root ..",
        "journal-agent estimate --model gpt2-small --plot .claude/x.png",
    ],
)
def test_finding_02_only_our_own_code_is_run_by_the_host(lab, command):
    _plant(lab)
    (lab.ws / "journal-agent").write_text(f"#!/bin/sh\ntouch {lab.outside / 'pwned'}\n")
    (lab.ws / "journal-agent").chmod(0o755)
    lab.bash(command, "bypassPermissions")
    lab.assert_nothing_outside()
    assert not (lab.ws / ".claude/x.png").exists()


def test_finding_02_plan_mode_writes_nothing_through_an_own_command(lab):
    lab.cli.process("ledger", "init", "--root", str(lab.ws), cwd=lab.ws, home=lab.home)
    before = (lab.ws / "learning_ledger.md").read_text()
    res = lab.bash('journal-agent ledger add-item developing "**X**: y"', "plan", ("Bash",))
    assert "Traceback" not in res.stdout
    assert (lab.ws / "learning_ledger.md").read_text() == before


def test_finding_02_feedback_through_bash_is_recorded_by_the_host(lab):
    """`/learn`'s documented way to record feedback: `journal-agent feedback …` through Bash
    (it failed with a traceback: the lock was on a read-only mount)."""
    lab.cli.process("commands", "--eject", "learn", "--root", str(lab.ws), cwd=lab.ws,
                    home=lab.home)  # fmt: skip
    res = lab.bash('journal-agent feedback "be shorter" --file learn', "bypassPermissions")
    assert "feedback recorded" in res.stdout, res.stdout
    assert (lab.ws / ".journal/history/feedback.jsonl").read_text().count("be shorter") == 1
