"""The files a journal's code references name are the model's to write (the workspace is
writable in acceptEdits and bypassPermissions): `journal check`, an append's checks and each
SessionStart's detached refresh read them. A referenced file grown to gigabytes (the sandbox
lets one file reach 8 GiB) must not be read whole, a FIFO must not block, and SessionStart's
count of drafts must survive hostile names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from journal_agent.capture.status import refresh, session_start_line, waiting_drafts
from journal_agent.journal.refs import MAX_SOURCE_BYTES
from tests.entries import render_entry


def _journal_with_a_reference(root: Path) -> None:
    (root / "train.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    entry = root / "entry.md"
    entry.write_text(
        render_entry(
            "Warm-up Is Counted in Steps",
            "2026-11-26",
            context="Changing the warm-up in `train.py:8`.",
            question="Is warm-up counted in epochs or in steps?",
            intuition="The scheduler counts optimizer steps (`train.py:8`).",
            tags="#warmup",
        ),
        encoding="utf-8",
    )
    done = _journal_agent(root, "journal", "append", "--file", "entry.md")
    assert done.returncode == 0, done.stderr


def _journal_agent(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("journal-agent")), *args, "--root", str(root)]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)


def test_a_referenced_file_grown_past_the_bound_is_not_read_whole(tmp_path):
    """Read whole, a 1 GiB file cost `journal check` and the refresh 1 GiB of memory each
    (8 GiB for the largest file the sandbox allows); now: one line saying it is too large."""
    root = tmp_path
    _journal_with_a_reference(root)
    with (root / "train.py").open("r+b") as f:  # sparse: costs no disk
        f.truncate(MAX_SOURCE_BYTES + 1)
    check = _journal_agent(root, "journal", "check")
    said = check.stdout + check.stderr
    assert check.returncode != 0 and "Traceback" not in said, said
    assert "too large to be source" in said, said
    with (root / "train.py").open("r+b") as f:
        f.truncate(1 << 30)
    # The child's own peak, VmHWM of its address space: getrusage's ru_maxrss survives exec, so
    # a child of a big pytest worker (torch and transformers loaded) would report the worker's.
    code = (
        "import re, sys\n"
        "from journal_agent.capture.status import refresh\n"
        "refresh(sys.argv[1])\n"
        "status = open('/proc/self/status').read()\n"
        "print(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) * 1024 < 1 << 29, done.stdout  # the 1 GiB was not held in memory
    status = json.loads((root / ".journal" / "capture" / "status.json").read_text())
    assert status["stale_refs"] == 1, status


def test_a_referenced_path_turned_into_a_fifo_does_not_block(tmp_path):
    root = tmp_path
    _journal_with_a_reference(root)
    (root / "train.py").unlink()
    os.mkfifo(root / "train.py")
    refresh(root)  # returns (a FIFO is not read): the test would hang otherwise
    status = json.loads((root / ".journal" / "capture" / "status.json").read_text())
    assert status["stale_refs"] == 1
    check = _journal_agent(root, "journal", "check")
    assert check.returncode != 0 and "Traceback" not in check.stderr


def test_session_starts_count_of_drafts_survives_hostile_names(tmp_path):
    """Names with a newline, bytes that are not UTF-8, a FIFO, a symlink, a folder: counted
    only when they are regular files with the header, and the line is one line."""
    folder = tmp_path / ".journal" / "drafts"
    folder.mkdir(parents=True)
    header = b'<!-- journal-agent draft {"moments": []} -->\n## A (2026-11-26)\n'
    (folder / "two\nlines.md").write_bytes(header)
    os.makedirs(os.fsencode(folder), exist_ok=True)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "wb") as f:
        f.write(header)
    os.mkfifo(folder / "fifo.md")
    (folder / "link.md").symlink_to(folder / "two\nlines.md")
    (folder / "dir.md").mkdir()
    assert waiting_drafts(tmp_path) == 2
    line = session_start_line(tmp_path)
    assert "2 drafts to accept" in line and "\n" not in line
