"""The fourth review's findings 1-5 and the anki temp name, replayed against a real `git clone`
of a repository that committed the links (git keeps a committed symlink a symlink), with the
real hooks and the real CLI: nothing outside the workspace changes, nothing outside is read
into it, and each refusal is one sentence naming the path and the command that fixes it.

The "outside" is a home directory beside the workspace holding ~/.bashrc and ~/.ssh; every
test compares all of it, bytes and names, before and after."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.capture.hook_helpers import Transcript, insight, run_hook
from tests.entries import render_entry

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
BASHRC = "export PATH=$HOME/bin:$PATH\n"
PAYLOAD = "$(touch /tmp/journal-agent-pwned)"
QUIET = {"JOURNAL_AGENT_EMBEDDING_MODEL": "off"}


@dataclass
class Home:
    path: Path

    @property
    def bashrc(self) -> Path:
        return self.path / ".bashrc"

    @property
    def ssh(self) -> Path:
        return self.path / ".ssh"

    @property
    def key(self) -> Path:
        return self.ssh / "id_ed25519"

    def contents(self) -> dict[str, bytes]:
        """Every name under the home and its bytes (folders as b'<dir>')."""
        out = {}
        for top, dirs, files in os.walk(self.path):
            for name in dirs + files:
                full = Path(top) / name
                rel = str(full.relative_to(self.path))
                out[rel] = b"<dir>" if full.is_dir() else full.read_bytes()
        return out


@pytest.fixture
def home(tmp_path: Path) -> Home:
    h = Home(tmp_path / "home")
    h.ssh.mkdir(parents=True)
    h.bashrc.write_text(BASHRC)
    h.key.write_text(KEY)
    os.chmod(h.key, 0o600)
    (h.ssh / "known_hosts").write_text("github.com ssh-ed25519 AAAA\n")
    return h


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=x", "-c", "user.email=x@x", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Callable[..., Path]:
    """``clone(build, links)``: a repository ``build(folder)`` fills, with ``links`` ({name:
    target}) committed as symlinks, cloned with git into the workspace the tests use."""

    def make(build: Callable[[Path], None] | None = None, links: dict[str, Path] | None = None):
        evil = tmp_path / "evil"
        evil.mkdir()
        _git("init", "-q", cwd=evil)
        (evil / "train.py").write_text(f"import os\nos.system('{PAYLOAD}')\n")
        if build is not None:
            build(evil)
        for name, target in (links or {}).items():
            (evil / name).parent.mkdir(parents=True, exist_ok=True)
            (evil / name).symlink_to(target)
        _git("add", "-A", cwd=evil)
        _git("commit", "-q", "-m", "a project to learn from", cwd=evil)
        ws = tmp_path / "ws"
        _git("clone", "-q", str(evil), str(ws), cwd=tmp_path)
        for name in links or {}:
            assert (ws / name).is_symlink(), f"git did not keep {name} a link"
        return Path(os.path.realpath(ws))

    return make


def _entry(title: str = "Activation checkpointing", date: str = "2026-11-20") -> str:
    return render_entry(
        title,
        date,
        context="Studying train.py.",
        question="Why recompute?",
        intuition="Recompute activations during backward to save memory (train.py:2).",
        tags="#memory",
    )


def _one_sentence(done: subprocess.CompletedProcess[str], *names: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    for name in names:
        assert name in lines[0], lines[0]
    assert "`rm " in lines[0] and lines[0].endswith("try again.")
    return lines[0]


def _hooks_log(ws: Path) -> str:
    path = ws / ".journal" / "hooks.log"
    return path.read_text() if path.is_file() and not path.is_symlink() else ""


def _nothing_of(home: Home, ws: Path) -> None:
    """No file of the workspace holds the key or the shell profile read from outside."""
    for top, dirs, files in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            full = Path(top) / name
            if full.is_symlink():
                continue
            data = full.read_bytes()
            assert KEY.encode() not in data, full
            assert BASHRC.encode() not in data, full


# -- finding 1 -------------------------------------------------------------------------------


def test_finding_1_a_prompt_appends_nothing_through_a_committed_recall_log(clone, home, cli):
    def build(evil: Path) -> None:
        entry = _entry(f"Recompute activations {PAYLOAD} checkpointing")
        (evil / "entry.md").write_text(entry)
        cli("journal", "append", "--file", str(evil / "entry.md"), "--root", str(evil), env=QUIET)
        cli("journal", "search", "activations", "--root", str(evil), env=QUIET)
        with sqlite3.connect(evil / ".journal" / "index.sqlite") as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the index whole in one file

    ws = clone(build, {".journal/capture/recall.jsonl": home.bashrc})
    before = home.contents()
    prompt = {"session_id": "s1", "prompt": "Why recompute activations when checkpointing?"}
    done = run_hook("UserPromptSubmit", prompt, ws, env={"HOME": str(home.path)})
    assert done.returncode == 0 and done.stdout == b""
    assert home.contents() == before
    log = _hooks_log(ws)
    assert f"{ws}/.journal/capture/recall.jsonl is a symlink to {home.bashrc}" in log, log


# -- finding 2 -------------------------------------------------------------------------------


def test_finding_2_the_refresh_child_deletes_nothing_through_a_committed_ended_link(
    clone, home, tmp_path
):
    ws = clone(links={".journal/capture/ended": home.ssh})
    before = home.contents()
    env = {"HOME": str(home.path)}
    # A session that edited a file, then ended: SessionEnd moves its state into `ended` ...
    transcript = Transcript(tmp_path / "t" / "s1.jsonl", ws)
    transcript.prompt("tidy train.py")
    transcript.edit("train.py", "import os", "import os, sys")
    stop = {"session_id": "s1", "transcript_path": str(transcript.path)}
    assert run_hook("Stop", stop, ws, env=env).returncode == 0
    assert run_hook("SessionEnd", {"session_id": "s1"}, ws, env=env).returncode == 0
    assert run_hook("SessionStart", {"session_id": "s2"}, ws, env=env).returncode == 0
    # ... and the detached child lists and deletes what is there: run it here, to the end.
    child = run_hook("refresh", b"", ws, env={**env, "JOURNAL_AGENT_HOOK": "1"})
    assert child.returncode == 0
    assert home.contents() == before  # not one file of ~/.ssh gone, none moved in
    log = _hooks_log(ws)
    assert f"{ws}/.journal/capture/ended is a symlink to {home.ssh}" in log, log
    assert (ws / ".journal" / "capture" / "sessions" / "s1.json").is_file()  # kept, not lost


# -- finding 3 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "target"),
    [
        (".journal/inbox.jsonl", "bashrc"),
        (".journal/hooks.log", "bashrc"),
        (".journal/capture/sessions", "ssh"),
        (".journal/capture/proposals", "ssh"),
        (".journal/capture", "ssh"),
        (".journal", "ssh"),
    ],
)
def test_finding_3_the_hooks_write_nothing_through_a_committed_link(
    clone, home, tmp_path, link, target
):
    ws = clone(links={link: getattr(home, target)})
    before = home.contents()
    env = {"HOME": str(home.path)}
    transcript = Transcript(tmp_path / "t" / "s1.jsonl", ws)
    transcript.prompt("why warm up?")
    transcript.edit("train.py", "import os", "import os, sys")
    final = insight(f"Warm-up is counted in optimizer steps {PAYLOAD} (train.py:1).")
    transcript.say(final)
    stop = {"session_id": "s1", "transcript_path": str(transcript.path)}
    for event, payload in [
        ("Stop", {**stop, "last_assistant_message": final}),
        ("SessionEnd", {"session_id": "s1"}),
        ("refresh", b""),
        ("SessionStart", {"session_id": "s2"}),
        ("Stop", "not json"),  # a failure the hook logs
    ]:
        extra = {"JOURNAL_AGENT_HOOK": "1"} if event == "refresh" else {}
        done = run_hook(event, payload, ws, env={**env, **extra})
        assert done.returncode == 0 and b"Traceback" not in done.stderr
    assert home.contents() == before
    if link != ".journal/hooks.log" and link != ".journal":
        log = _hooks_log(ws)
        assert f"{ws}/{link} is a symlink to {getattr(home, target)}" in log, log


# -- finding 4 -------------------------------------------------------------------------------


def _append(cli, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (ws / "entry.md").write_text(_entry())
    return cli("journal", "append", "--file", str(ws / "entry.md"), "--root", str(ws), env=env)


def _estimate(cli, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli("estimate", "--model", "tiny-gpt2", "--root", str(ws), env=env)


def _feedback(cli, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    ejected = cli("commands", "--eject", "learn", "--root", str(ws), env=env)
    if ejected.returncode != 0:
        return ejected  # (it keeps the file it replaces under .journal/history/ too)
    learn = ws / ".claude" / "commands" / "learn.md"
    learn.write_text(learn.read_text() + "\nOne more rule.\n")
    return cli("feedback", "Shorter, please", "--file", "learn", "--root", str(ws), env=env)


def _transcript(cli, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A run's transcript, as the runtime opens it for every run."""
    from journal_agent.errors import as_user_error
    from journal_agent.runtime.transcript import Transcript as RunTranscript

    try:
        RunTranscript.for_run(ws, "20261120-000000-abcdef").write("start", "main", text=PAYLOAD)
    except OSError as exc:
        said = as_user_error(exc)
        assert said is not None
        return subprocess.CompletedProcess([], 1, "", f"error: {said.message}\n")
    return subprocess.CompletedProcess([], 0, "", "")


HOST_WRITERS = [
    (".journal/refs.jsonl", "bashrc", _append),
    (".journal/journal.lock", "bashrc", _append),
    (".journal/locks", "ssh", _feedback),
    (".journal/history/feedback.jsonl", "bashrc", _feedback),
    (".journal/history", "ssh", _feedback),
    (".journal/measurements", "ssh", _estimate),
    (".journal/transcripts", "ssh", _transcript),
]


@pytest.mark.parametrize(
    ("link", "target", "command"), HOST_WRITERS, ids=[w[0] for w in HOST_WRITERS]
)
def test_finding_4_host_side_writers_follow_no_committed_link(
    clone, home, cli, link, target, command
):
    ws = clone(links={link: getattr(home, target)})
    before = home.contents()
    journal_before = (ws / "learning_journal.md").exists()
    done = command(cli, ws, {**QUIET, "HOME": str(home.path)})
    _one_sentence(done, f"{ws}/{link} is a symlink to {getattr(home, target)}")
    assert home.contents() == before
    assert (ws / "learning_journal.md").exists() == journal_before  # an append refused whole


def test_finding_4_the_appends_log_as_a_link_takes_nothing_and_the_append_stands(clone, home, cli):
    """appends.jsonl is written after the entry is in: refusing it must not make the user
    append the entry again; doctor names the link."""
    ws = clone(links={".journal/appends.jsonl": home.bashrc})
    before = home.contents()
    done = _append(cli, ws, {**QUIET, "HOME": str(home.path)})
    assert done.returncode == 0, done.stderr
    assert home.contents() == before
    assert "## Activation checkpointing" in (ws / "learning_journal.md").read_text()
    checks = cli.json("doctor", "--root", str(ws), env={"HOME": str(home.path)})
    named = [c["detail"] for c in checks if c["name"] == "journal files" and not c["ok"]]
    assert any(f"{ws}/.journal/appends.jsonl is a symlink to" in d for d in named), named


def test_finding_4_the_hooks_titles_file_as_a_link_takes_nothing_and_search_stands(
    clone, home, cli
):
    """.journal/titles.tsv is a cache the index writes for the hooks (#33): a link there is
    never written through, search and append work, and doctor names it."""
    ws = clone(links={".journal/titles.tsv": home.bashrc})
    before = home.contents()
    env = {**QUIET, "HOME": str(home.path)}
    assert _append(cli, ws, env).returncode == 0
    done = cli("journal", "search", "activations", "--root", str(ws), env=env)
    assert done.returncode == 0, done.stderr
    assert home.contents() == before
    assert (ws / ".journal" / "titles.tsv").is_symlink()
    checks = cli.json("doctor", "--root", str(ws), env={"HOME": str(home.path)})
    named = [c["detail"] for c in checks if c["name"] == "journal files" and not c["ok"]]
    assert any(f"{ws}/.journal/titles.tsv is a symlink to" in d for d in named), named


# -- finding 5 -------------------------------------------------------------------------------


READERS = [
    ("learning_journal.md", ("journal", "append", "--file", "entry.md")),
    ("learning_journal.md", ("journal", "list")),
    ("learning_journal.md", ("journal", "check")),
    ("learning_journal.md", ("journal", "search", "activations")),
    ("learning_ledger.md", ("ledger", "add-item", "developing", "warm-up counts steps")),
    ("learning_ledger.md", ("ledger", "check")),
]


@pytest.mark.parametrize(("name", "args"), READERS, ids=[" ".join(r[1][:2]) for r in READERS])
def test_finding_5_a_secret_outside_is_never_read_into_the_workspace(clone, home, cli, name, args):
    ws = clone(lambda evil: (evil / "entry.md").write_text(_entry()), {name: home.key})
    before = home.contents()
    done = cli(*args, "--root", str(ws), cwd=ws, env={**QUIET, "HOME": str(home.path)})
    said = _one_sentence(done, f"{ws}/{name} is a symlink to {home.key}")
    assert KEY.splitlines()[1] not in said + done.stdout
    assert home.contents() == before
    assert (ws / name).is_symlink()  # left as it was, for the user to remove
    _nothing_of(home, ws)


def test_finding_5_a_hard_link_to_a_secret_is_not_rewritten_either(tmp_path, home, cli):
    """A hard link (a sandboxed `ln`, since git cannot commit one) gets the same refusal."""
    ws = tmp_path / "ws2"
    ws.mkdir()
    os.link(home.key, ws / "learning_journal.md")
    (ws / "train.py").write_text("import os\nos.system('x')\n")
    (ws / "entry.md").write_text(_entry())
    done = cli("journal", "append", "--file", "entry.md", "--root", str(ws), cwd=ws)
    assert done.returncode == 1 and "is a file with 2 names (hard links)" in done.stderr
    assert home.key.read_text() == KEY
    assert os.stat(home.key).st_nlink == 2  # nothing replaced it


# -- export anki: the predictable temp name ---------------------------------------------------


def test_export_anki_writes_no_deck_through_a_planted_temp_name_or_link(clone, home, cli):
    pytest.importorskip("genanki")
    victim = home.path / "notes.txt"
    victim.write_text("the user's notes\n")
    ws = clone(
        lambda evil: (evil / "entry.md").write_text(_entry()),
        {".deck.apkg.tmp": victim, "linked.apkg": home.bashrc},
    )
    before = home.contents()
    env = {**QUIET, "HOME": str(home.path)}
    assert _append(cli, ws, env).returncode == 0
    done = cli("export", "anki", "deck.apkg", "--root", str(ws), cwd=ws, env=env)
    assert done.returncode == 0, done.stderr
    assert (ws / "deck.apkg").read_bytes()[:2] == b"PK"  # a deck, written beside
    refused = cli("export", "anki", "linked.apkg", "--root", str(ws), cwd=ws, env=env)
    _one_sentence(refused, f"{ws}/linked.apkg is a symlink to {home.bashrc}")
    json_out = cli("export", "json", "linked.apkg", "--root", str(ws), cwd=ws, env=env)
    _one_sentence(json_out, f"{ws}/linked.apkg is a symlink to {home.bashrc}")
    assert home.contents() == before


# -- every writer: a symlink, a hard link, a FIFO ----------------------------------------------


PLANTS = ["symlink", "hard link", "fifo"]


def _plant(kind: str, name: Path, home: Home) -> str:
    name.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        name.symlink_to(home.bashrc)
        return f"is a symlink to {home.bashrc}"
    if kind == "hard link":
        os.link(home.bashrc, name)
        return "is a file with 2 names (hard links)"
    os.mkfifo(name)
    return "is a FIFO (named pipe)"


def _stop(ws: Path, home: Home, tmp_path: Path) -> str:
    transcript = Transcript(tmp_path / "t" / "s1.jsonl", ws)
    transcript.prompt("why?")
    final = insight("Warm-up is counted in optimizer steps.")
    transcript.say(final)
    payload = {"session_id": "s1", "transcript_path": str(transcript.path)}
    done = run_hook("Stop", {**payload, "last_assistant_message": final}, ws,
                    env={"HOME": str(home.path)}, timeout=20)  # fmt: skip
    assert done.returncode == 0
    return _hooks_log(ws)


def _cli_sentence(args: tuple[str, ...]) -> Callable[..., str]:
    def go(ws: Path, home: Home, tmp_path: Path, cli) -> str:
        (ws / "entry.md").write_text(_entry())
        done = cli(*args, "--root", str(ws), cwd=ws, env={**QUIET, "HOME": str(home.path)})
        said = done.stdout + done.stderr  # (a tool's error result is its output)
        assert done.returncode == 1 and "Traceback" not in said, said
        return said

    return go


def _prompt(ws: Path, home: Home, tmp_path: Path, cli) -> str:
    (ws / "learning_journal.md").write_text(_entry("Warm-up counts optimizer steps"))
    cli("journal", "search", "warm", "--root", str(ws), env=QUIET)  # the index recall reads
    prompt = {"session_id": "s1", "prompt": "does warm-up count optimizer steps?"}
    assert run_hook("UserPromptSubmit", prompt, ws, env={"HOME": str(home.path)}).returncode == 0
    return _hooks_log(ws)


def _feedback_sentence(ws: Path, home: Home, tmp_path: Path, cli) -> str:
    done = _feedback(cli, ws, {**QUIET, "HOME": str(home.path)})
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in said, said
    return said


def _refresh(ws: Path, home: Home, tmp_path: Path, cli) -> str:
    """The detached child's status cache: refs to count, so the child writes status.json."""
    (ws / "entry.md").write_text(_entry())
    assert cli("journal", "append", "--file", "entry.md", "--root", str(ws), cwd=ws,
               env=QUIET).returncode == 0  # fmt: skip
    env = {"HOME": str(home.path), "JOURNAL_AGENT_HOOK": "1"}
    assert run_hook("refresh", b"", ws, env=env).returncode == 0
    return _hooks_log(ws)


WRITERS = {
    ".journal/history/feedback.jsonl": _feedback_sentence,
    ".journal/capture/status.json": _refresh,
    ".journal/inbox.jsonl": lambda ws, home, tmp_path, cli: _stop(ws, home, tmp_path),
    ".journal/capture/recall.jsonl": _prompt,
    "learning_journal.md": _cli_sentence(("journal", "append", "--file", "entry.md")),
    "learning_ledger.md": _cli_sentence(("ledger", "add-item", "developing", "warm-up")),
    ".journal/journal.lock": _cli_sentence(("journal", "append", "--file", "entry.md")),
    ".journal/refs.jsonl": _cli_sentence(("journal", "append", "--file", "entry.md")),
    ".journal/index.sqlite": _cli_sentence(("journal", "search", "warm")),
    ".journal/review.json": _cli_sentence(("review", "--list")),
    ".journal/tool-reads.json": _cli_sentence(("tool", "Read", json.dumps({"file_path": "a"}))),
    ".journal/locks/tool-reads.lock": _cli_sentence(
        ("tool", "Read", json.dumps({"file_path": "entry.md"}))
    ),
}


@pytest.mark.parametrize("kind", PLANTS)
@pytest.mark.parametrize("name", list(WRITERS))
def test_every_writer_refuses_a_link_a_hard_link_and_a_fifo(tmp_path, home, cli, name, kind):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("import os\nos.system('x')\n")
    if name == ".journal/index.sqlite":
        (ws / "learning_journal.md").write_text(_entry("Warm-up counts steps"))
    said = _plant(kind, ws / name, home)
    before = home.contents()
    out = WRITERS[name](ws, home, tmp_path, cli)  # a FIFO never blocks it (the test ends)
    assert f"{ws}/{name} {said}" in out, out
    assert home.contents() == before


# -- doctor ----------------------------------------------------------------------------------


def test_doctor_names_every_oddity_with_the_command_that_fixes_it(clone, home, cli):
    ws = clone(
        links={
            "learning_journal.md": home.key,
            ".journal/capture/ended": home.ssh,
            ".journal/inbox.jsonl": home.bashrc,
        }
    )
    os.mkfifo(ws / ".journal" / "hooks.log")
    (ws / ".journal" / "review.json").mkdir()
    (ws / ".journal" / "drafts").mkdir()
    os.link(home.bashrc, ws / ".journal" / "drafts" / "x.md")
    checks = cli.json("doctor", "--root", str(ws), env={"HOME": str(home.path)})
    named = [c["detail"] for c in checks if c["name"] == "journal files"]
    assert all(not c["ok"] for c in checks if c["name"] == "journal files")
    expected = {
        "learning_journal.md": f"is a symlink to {home.key}",
        ".journal/capture/ended": f"is a symlink to {home.ssh}",
        ".journal/inbox.jsonl": f"is a symlink to {home.bashrc}",
        ".journal/hooks.log": "is a FIFO (named pipe)",
        ".journal/review.json": "is a directory where journal-agent needs a file",
        ".journal/drafts/x.md": "is a file with 2 names (hard links)",
    }
    for name, what in expected.items():
        said = [d for d in named if d.startswith(f"{ws}/{name} {what}")]
        assert len(said) == 1, (name, named)
    assert len(named) == len(expected)
    # Each sentence's command fixes what it names: afterwards doctor finds nothing.
    for said in named:
        subprocess.run(said.split("`")[1], shell=True, check=True, cwd=ws)
    after = cli.json("doctor", "--root", str(ws), env={"HOME": str(home.path)})
    assert [c["ok"] for c in after if c["name"] == "journal files"] == [True]
    assert home.contents()[".ssh/id_ed25519"] == KEY.encode()
    assert (home.ssh / "known_hosts").exists() and home.bashrc.read_text() == BASHRC


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_synonyms_list_is_never_followed_nor_waited_for(tmp_path, home, cli, kind):
    """.journal/synonyms.txt is read at every search: a link to a file outside is no list, and
    a FIFO there never blocks the search (the test would hang)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "learning_journal.md").write_text(_entry("Warm-up counts optimizer steps"))
    home.bashrc.write_text("optimizer | pwned\n")  # a list that would add a spelling if read
    _plant(kind, ws / ".journal" / "synonyms.txt", home)
    done = cli("journal", "search", "pwned", "--root", str(ws), env=QUIET)
    assert done.returncode == 0, done.stderr
    assert "Warm-up" not in done.stdout  # the planted spelling was not taken
    # (the same list as a plain file of the project is taken: the test can fail)
    (ws / ".journal" / "synonyms.txt").unlink()
    (ws / ".journal" / "synonyms.txt").write_text(home.bashrc.read_text())
    assert "Warm-up" in cli("journal", "search", "pwned", "--root", str(ws), env=QUIET).stdout


@pytest.mark.parametrize("kind", ["symlink", "fifo", "file"])
def test_the_records_folder_is_never_followed_nor_replaced(tmp_path, home, cli, kind):
    """profiling's own few lines of the room (profiling/_files.py) for .journal/measurements."""
    ws = tmp_path / "ws"
    folder = ws / ".journal" / "measurements"
    folder.parent.mkdir(parents=True)
    if kind == "file":
        folder.write_text("not a folder")
        said = "is a file where a folder belongs"
    else:
        said = _plant(kind, folder, home)
    if kind == "symlink":
        folder.unlink()
        folder.symlink_to(home.ssh)
        said = f"is a symlink to {home.ssh}"
    before = home.contents()
    done = cli("estimate", "--model", "tiny-gpt2", "--root", str(ws), env=QUIET)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{folder} {said}" in done.stderr, done.stderr
    assert home.contents() == before
