"""A full disk, for real: a small tmpfs mounted in a user namespace holds the workspace, filled to
its last byte; then every writer runs as the user runs it (the CLI as a process, the Stop hook
as Claude Code starts it). Each says one sentence, exits 1 (a hook: 0, quietly), and loses
nothing: the journal, the ledger, the inbox and the reference anchors are byte for byte what
they were, no line is torn and no temp file is left. (The search index is a cache rebuilt from
the markdown: SQLite may leave it empty when it cannot grow it, which loses nothing.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.entries import render_entry
from tests.security.test_confined_room import FULL_DISK

REPO = Path(__file__).resolve().parents[2]

# Runs inside the namespace, on the tmpfs: prepares a workspace, fills the disk, runs each
# command and reports, as JSON, what each said and whether anything changed.
CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys
    ws, home, repo = sys.argv[1], sys.argv[2], sys.argv[3]
    env = {**os.environ, "HOME": home, "JOURNAL_AGENT_EMBEDDING_MODEL": "off",
           "PYTHONPATH": repo}

    def cli(*args, stdin=None):
        return subprocess.run([sys.executable, "-m", "journal_agent", *args, "--root", ws],
                              cwd=ws, env=env, capture_output=True, text=True, input=stdin)

    def hook(event, payload):
        return subprocess.run([sys.executable, "-I", "-S", repo + "/hooks/capture.py", event],
                              cwd=ws, env={**env, "CLAUDE_PROJECT_DIR": ws},
                              input=json.dumps(payload), capture_output=True, text=True)

    os.makedirs(ws)
    with open(ws + "/train.py", "w") as f:
        f.write("import os\\n" * 5)
    with open(ws + "/e1.md", "w") as f:
        f.write(ENTRY.format(title="ZeRO stage two"))
    with open(ws + "/e2.md", "w") as f:
        f.write(ENTRY.format(title="Activation checkpointing"))
    for done in (cli("journal", "append", "--file", "e1.md"),
                 cli("ledger", "add-item", "developing", "ZeRO stage two")):
        assert done.returncode == 0, done.stderr
    hook("Stop", {"session_id": "s1", "last_assistant_message": INSIGHT.format(n=1)})
    for name in os.listdir(ws + "/.journal"):
        if name.startswith("index.sqlite"):
            os.unlink(ws + "/.journal/" + name)  # the next search must build it again
    watched = ["learning_journal.md", "learning_ledger.md", ".journal/inbox.jsonl",
               ".journal/refs.jsonl", ".journal/review.json"]

    def state():
        out = {}
        for top, dirs, files in os.walk(ws):
            for name in files:
                # (caches, below; empty lock files and an empty hooks.log, whose line the full
                # disk refused, take no data block to make)
                cache = name.startswith(("index.sqlite", "vectors.sqlite"))
                empty = name.endswith(".lock") or name == "hooks.log"
                if not cache and not (empty and os.path.getsize(os.path.join(top, name)) == 0):
                    out[os.path.relpath(os.path.join(top, name), ws)] = None
        for name in watched:
            try:
                out[name] = open(os.path.join(ws, name), "rb").read().hex()
            except FileNotFoundError:
                pass
        return out

    # The inbox ends on a page boundary: an append needs a new page, not the slack of its last
    # (a tmpfs full "to the last byte" still has room inside each file's last page).
    with open(ws + "/.journal/inbox.jsonl", "ab") as f:
        size = f.tell()
        pad = -(size + len(b'{"pad": ""}\\n')) % 4096
        f.write(b'{"pad": "' + b"x" * pad + b'"}\\n')
    fd = os.open(ws + "/../filler", os.O_WRONLY | os.O_CREAT)
    for size in (1 << 16, 4096, 1):  # fill the disk to the last byte
        try:
            while True:
                os.write(fd, b"z" * size)
        except OSError:
            pass
    before = state()
    report = {}
    for name, args in COMMANDS:
        done = cli(*args)
        now = state()
        changed = sorted(k for k in set(now) | set(before) if now.get(k, 1) != before.get(k, 1))
        report[name] = [done.returncode, done.stdout, done.stderr, changed]
    stop = hook("Stop", {"session_id": "s2", "last_assistant_message": INSIGHT.format(n=2)})
    now = state()
    changed = sorted(k for k in set(now) | set(before) if now.get(k, 1) != before.get(k, 1))
    report["Stop hook"] = [stop.returncode, stop.stdout, stop.stderr, changed]
    print(json.dumps(report))
    """
)
ENTRY = render_entry(
    "{title}",
    "2026-11-20",
    context="Studying train.py.",
    question="Why shard?",
    intuition="It shards gradients (train.py:2).",
    tags="#zero",
)
INSIGHT = (
    "`\u2605 Insight \u2500\u2500\u2500\u2500\u2500`\nMoment {n}: warm-up counts optimizer "
    "steps.\n`\u2500\u2500\u2500\u2500\u2500`"
)
COMMANDS = [
    ("journal append", ("journal", "append", "--file", "e2.md")),
    ("ledger add-item", ("ledger", "add-item", "developing", "activation checkpointing")),
    ("journal search", ("journal", "search", "zero")),
    ("estimate", ("estimate", "--model", "tiny-gpt2")),
    ("review --rate", ("review", "--rate", "entry:zero-stage-two-2026-11-20", "good")),
    ("export json", ("export", "json", "out.json")),
    ("inbox dismiss", ("inbox", "dismiss", "1")),
]


@FULL_DISK
def test_every_writer_on_a_full_disk_says_one_sentence_and_loses_nothing(tmp_path):
    mount = tmp_path / "mnt"
    mount.mkdir()
    (tmp_path / "home").mkdir()
    script = tmp_path / "child.py"
    script.write_text(
        f"ENTRY = {ENTRY!r}\nINSIGHT = {INSIGHT!r}\nCOMMANDS = {COMMANDS!r}\n" + CHILD
    )
    done = subprocess.run(
        [
            shutil.which("unshare") or "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=2m tmpfs "{mount}" && '
            f'"{sys.executable}" "{script}" "{mount}/ws" "{tmp_path}/home" "{REPO}"',
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    for name, (code, out, err, changed) in report.items():
        assert changed == [], f"{name} changed {changed} on a full disk: {err}"
        assert "Traceback" not in out + err, (name, err)
        if name == "Stop hook":
            assert code == 0 and out == "", (name, out, err)  # a hook fails open, quietly
            continue
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1, (name, code, out, err)
        assert "disk is full" in lines[0] and "free some space" in lines[0], (name, lines[0])


_ANCHOR_CHILD = """
import resource, sys
from journal_agent.cli import main
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
main(sys.argv[2:])
"""


def test_a_journal_write_that_fails_takes_back_the_anchors_it_recorded(tmp_path, cli):
    """The anchors go in first (under the journal's lock), then the journal: when the journal's
    write fails (here the kernel's file-size limit, EFBIG: the new journal is larger than the
    limit, the anchors' line is not), the anchors' line is cut back, so refs.jsonl names no
    entry that is not there."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("import os\n" * 5)
    body = "Long notes. " * 4000  # a journal far larger than refs.jsonl
    (ws / "e1.md").write_text(
        render_entry("ZeRO stage two", "2026-11-20", context="c", question="q?",
                     intuition=f"It shards gradients (train.py:2). {body}", tags="#zero")
    )  # fmt: skip
    (ws / "e2.md").write_text(
        render_entry("Activation checkpointing", "2026-11-21", context="c", question="q?",
                     intuition="Recompute to save memory (train.py:3).", tags="#memory")
    )  # fmt: skip
    env = {"JOURNAL_AGENT_EMBEDDING_MODEL": "off"}
    assert (
        cli("journal", "append", "--file", "e1.md", "--root", str(ws), cwd=ws, env=env).returncode
        == 0
    )
    cli("journal", "search", "zero", "--root", str(ws), env=env)  # the index, built beforehand
    journal, refs = ws / "learning_journal.md", ws / ".journal" / "refs.jsonl"
    before = (journal.read_bytes(), refs.read_bytes())
    limit = journal.stat().st_size + 100
    assert refs.stat().st_size + 2000 < limit
    done = subprocess.run(
        [sys.executable, "-c", _ANCHOR_CHILD, str(limit), "journal", "append", "--file",
         "e2.md", "--root", str(ws)],
        capture_output=True, text=True, cwd=ws,
        env=cli.environment(env),
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "a file-size limit was reached" in done.stderr, done.stderr
    assert (journal.read_bytes(), refs.read_bytes()) == before
    assert "activation" not in refs.read_text().lower()
