"""No secret reaches the model or a transcript through a tool result, `@file` or the feedback
history, and editing around a secret the model saw redacted keeps it.

The fourth review (#29): "a token in .git/config's remote URL reaches the model through Read,
Grep, Bash and @file (the view hides it)"; the feedback history stored keys verbatim. Each test
tries it for real — a git clone whose remote URL holds a token, the real CLI, the real SDK
against a scripted model — and checks the token is nowhere the model or a transcript sees."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.runtime.runtime_helpers import write_agent, write_command

TOKEN = "glpat-Zx8vQ2mK9pL4nR7tW1yBq3"
PIP = "pipT0ken77secret"
REMOTE = f"https://oauth2:{TOKEN}@gitlab.example.org/ml/train.git"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)  # fmt: skip


@pytest.fixture
def clone(tmp_path) -> Path:
    """A clone whose remote URL holds a token (as `git clone https://oauth2:TOKEN@…` leaves
    it), and a requirements file with a credential URL."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _git(upstream, "init", "-q")
    (upstream / "train.py").write_text("lr = 3e-4\n")
    (upstream / "requirements.txt").write_text(
        f"--index-url https://builder:{PIP}@pypi.corp.example.net/simple\ntorch\n"
    )
    _git(upstream, "add", ".")
    _git(upstream, "commit", "-qm", "init")
    ws = tmp_path / "ws"
    _git(tmp_path, "clone", "-q", str(upstream), str(ws))
    _git(ws, "remote", "set-url", "origin", REMOTE)
    assert TOKEN in (ws / ".git/config").read_text()
    return ws


def _tool(cli, ws: Path, name: str, params: dict) -> subprocess.CompletedProcess[str]:
    return cli("tool", name, json.dumps(params), "--root", str(ws), home=ws.parent / "home")


def test_finding_git_config_token_read_and_grep_show_it_redacted(cli, clone):
    read = _tool(cli, clone, "Read", {"file_path": ".git/config"})
    assert read.returncode == 0, read.stderr
    assert TOKEN not in read.stdout
    assert "url = https://oauth2:[REDACTED]@gitlab.example.org/ml/train.git" in read.stdout
    grep = _tool(cli, clone, "Grep", {"pattern": "url|index-url", "path": ".",
                                      "output_mode": "content", "glob": "**/*"})  # fmt: skip
    assert grep.returncode == 0, grep.stderr
    assert TOKEN not in grep.stdout and PIP not in grep.stdout
    assert "https://builder:[REDACTED]@pypi.corp.example.net/simple" in grep.stdout
    # Grep never searches .git/, even named: a pattern would be an oracle for the token
    # ("oauth2:g" matches? "oauth2:gl"?) that no redaction of its result closes.
    for pattern in ("url", "oauth2:g"):
        for mode in ("content", "count", "files_with_matches"):
            oracle = _tool(cli, clone, "Grep", {"pattern": pattern, "path": ".git/config",
                                                "output_mode": mode})  # fmt: skip
            assert oracle.returncode == 1 and "does not search inside .git/" in oracle.stdout
            assert TOKEN not in oracle.stdout


def test_finding_git_config_token_bash_output_is_redacted(lab):
    _git(lab.ws, "remote", "add", "origin", REMOTE)
    lab.git_config = (lab.ws / ".git/config").read_text()
    for command in ("cat .git/config", "git remote -v", "git config --get remote.origin.url"):
        done = lab.bash(command, "bypassPermissions", cli=command.startswith("cat"))
        assert TOKEN not in done.stdout + done.stderr, command
        assert "oauth2:[REDACTED]@gitlab.example.org" in done.stdout, (command, done.stdout)
    # A command that transforms what it reads gets past any detector of its output: inside
    # the sandbox, .git/config is a copy with the token redacted, so there is none to get.
    for command in ("rev .git/config", "base64 -w0 .git/config", "sed 's/./& /g' .git/config",
                    "od -c .git/config | tr -d ' \\n'"):  # fmt: skip
        out = lab.bash(command, "bypassPermissions").stdout
        assert out.strip() and "Permission denied" not in out, (command, out)
        flat = out.replace(" ", "").replace("\n", "")
        for form in (TOKEN, TOKEN[::-1], TOKEN[:12]):
            assert form not in flat, (command, out)
        if command.startswith("base64"):
            assert TOKEN[:12] not in base64.b64decode(out.strip()).decode("utf-8")
    assert TOKEN in (lab.ws / ".git/config").read_text()  # the host's file is as it was
    lab.assert_nothing_outside()


def test_finding_git_config_token_at_file_is_inlined_redacted(cli, clone):
    write_command(clone, "remote", "Where does this clone push? @.git/config")
    done = cli("command", "remote", "--dry-run", "--root", str(clone), home=clone.parent / "home",
               env={"ANTHROPIC_API_KEY": None})  # fmt: skip
    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)["request"]["messages"][0]["content"][0]["text"]
    assert "@.git/config:" in sent and "oauth2:[REDACTED]@gitlab.example.org" in sent
    assert TOKEN not in done.stdout


def test_finding_git_config_token_never_reaches_the_model_nor_the_transcript(clone):
    """A whole run: the model reads .git/config, greps for the index URL and cats the file
    through Bash; what it is sent back, the transcript and the run's answer hold no token."""
    from journal_agent.runtime import run_agent

    write_agent(clone, "dev", "You look around.", tools="Read, Grep, Bash")
    model = ScriptedModel([
        reply(tool_use("Read", {"file_path": ".git/config"}),
              tool_use("Grep", {"pattern": "index-url", "output_mode": "content"})),
        reply(tool_use("Bash", {"command": "cat .git/config requirements.txt"})),
        reply("The remote is gitlab.example.org."),
    ])  # fmt: skip
    result = run_agent("dev", "where is the remote?", root=clone, client=model.client(),
                       home=clone.parent / "home", mode="bypassPermissions")  # fmt: skip
    assert result.final_text == "The remote is gitlab.example.org."
    sent = json.dumps([r.body for r in model.requests])
    assert sent.count("oauth2:[REDACTED]@gitlab.example.org") >= 2  # Read, then Bash
    assert "builder:[REDACTED]@pypi.corp.example.net" in sent  # Grep
    transcripts = list((clone / ".journal" / "transcripts").glob("*.jsonl"))
    logged = "".join(p.read_text() for p in transcripts)
    for leaked in (TOKEN, PIP):
        assert leaked not in sent and leaked not in logged


def _edit(cli, ws: Path, name: str, params: dict) -> subprocess.CompletedProcess[str]:
    return cli("tool", name, json.dumps(params), "--root", str(ws), "--mode", "acceptEdits",
               home=ws.parent / "home")  # fmt: skip


def test_editing_around_a_secret_shown_redacted_keeps_it(cli, clone):
    """Read shows the token as [REDACTED]; an Edit and a Write made from what the model saw put
    it back, one that would write the marker over it is refused, and nothing is lost."""
    reqs = clone / "requirements.txt"
    read = _edit(cli, clone, "Read", {"file_path": "requirements.txt"})
    seen = "\n".join(line.split("\t", 1)[1] for line in read.stdout.splitlines() if "\t" in line)
    assert seen == "--index-url https://builder:[REDACTED]@pypi.corp.example.net/simple\ntorch"
    # Edit the line holding the secret, as the model saw it: the host changes, the token stays.
    url_line = seen.splitlines()[0]
    edit = _edit(
        cli,
        clone,
        "Edit",
        {
            "file_path": "requirements.txt",
            "old_string": url_line,
            "new_string": url_line.replace("pypi.corp", "pypi.ml"),
        },
    )
    assert edit.returncode == 0, edit.stdout
    assert reqs.read_text().startswith(f"--index-url https://builder:{PIP}@pypi.ml.example.net/")
    assert PIP not in edit.stdout and "[REDACTED]@pypi.ml" in edit.stdout
    # A whole-file Write of what the model saw, with one more line: the token stays.
    seen = seen.replace("pypi.corp", "pypi.ml")
    write = _edit(cli, clone, "Write", {"file_path": "requirements.txt",
                                        "content": seen + "\nnumpy\n"})  # fmt: skip
    assert write.returncode == 0, write.stdout
    assert reqs.read_text() == (
        f"--index-url https://builder:{PIP}@pypi.ml.example.net/simple\ntorch\nnumpy\n"
    )
    # Writing the marker over the secret (a second marker: the counts differ) is refused.
    bad = _edit(cli, clone, "Write", {"file_path": "requirements.txt",
                                      "content": "[REDACTED]\n[REDACTED]\n"})  # fmt: skip
    assert bad.returncode == 1 and "has 2 [REDACTED] where the text it replaces has 1" in bad.stdout
    assert PIP in reqs.read_text()
    # Leaving the marker out removes the value, as asked.
    edit = _edit(cli, clone, "Edit", {"file_path": "requirements.txt",
                                      "old_string": "https://builder:[REDACTED]@",
                                      "new_string": "https://"})  # fmt: skip
    assert edit.returncode == 0, edit.stdout
    assert reqs.read_text().startswith("--index-url https://pypi.ml.example.net/simple\n")


def test_an_old_string_cutting_a_redacted_value_is_refused(cli, clone):
    _edit(cli, clone, "Read", {"file_path": "requirements.txt"})
    before = (clone / "requirements.txt").read_text()
    done = _edit(cli, clone, "Edit", {"file_path": "requirements.txt",
                                      "old_string": "DACTED]@pypi", "new_string": "x"})  # fmt: skip
    assert done.returncode == 1 and "not found" in done.stdout
    done = _edit(
        cli,
        clone,
        "Edit",
        {
            "file_path": "requirements.txt",
            "old_string": "builder:[REDACTED]@pypi",
            "new_string": "builder:[REDACTED]:[REDACTED]@pypi",
        },
    )
    assert done.returncode == 1 and "Keep every [REDACTED]" in done.stdout
    assert (clone / "requirements.txt").read_text() == before


def test_finding_feedback_history_keeps_no_key(cli, tmp_path):
    """`journal-agent feedback` stored what the user typed verbatim, keys included."""
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    assert cli("commands", "--eject", "learn", "--root", str(ws), home=home).returncode == 0
    learn = ws / ".claude/commands/learn.md"
    learn.write_text(learn.read_text() + "\nCite every number.\n")
    key = "sk-ant-api03-Zx8vQ2mK9pL4nR7tW1yB-feedback"
    said = f"it failed with my key {key} and the password is hunter2 — cite numbers"
    done = cli("feedback", said, "--root", str(ws), home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    stored = (ws / ".journal/history/feedback.jsonl").read_text()
    assert key not in stored and "hunter2" not in stored
    assert "[REDACTED]" in stored and "cite numbers" in stored
    history = cli("feedback", "--history", "--root", str(ws), home=home)
    assert key not in history.stdout and "hunter2" not in history.stdout


def test_a_dismissal_reason_in_the_inbox_keeps_no_secret(tmp_path):
    """The inbox's one writer redacts whatever it is handed (a moment's text, a reason)."""
    from journal_agent.capture import inbox, store

    moment = store.new_moment("insight", "Warm-up is counted in optimizer steps.")
    store.append(tmp_path, [moment])
    inbox.dismiss(tmp_path, moment["id"], reason="dup; token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4")
    raw = (tmp_path / ".journal/inbox.jsonl").read_text()
    assert "ghp_A1b2" not in raw and "dup; token [REDACTED]" in raw


def test_the_scrubber_learns_what_it_found(tmp_path):
    """A transcript redacts a value found once (a .env line) where the model repeats it
    alone later, where the detector would not find it on its own."""
    code = (
        "from journal_agent.runtime.transcript import Scrubber\n"
        "s = Scrubber()\n"
        "print(s.text('DB_PASSWORD=Sup3rS3cret!'))\n"
        "print(s.text('I used Sup3rS3cret! to log in'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out == "DB_PASSWORD=[REDACTED]\nI used [REDACTED] to log in\n"
