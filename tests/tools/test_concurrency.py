"""Parallel agents appending to one file through the tool layer lose nothing.

Each worker is a separate run (its own read tracking) that Reads the file, then Edits the end
marker into "its line + marker"; on "modified since read" it Reads again and retries, as the
tool descriptions tell the model to.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from journal_agent.tools.base import ToolContext
from journal_agent.tools.edit import Edit
from journal_agent.tools.read import Read
from journal_agent.tools.read_tracking import ReadTracker
from journal_agent.tools.write import Write

MARKER = "<!-- end of journal -->"

WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.edit import Edit
    from journal_agent.tools.read import Read
    from journal_agent.tools.read_tracking import ReadTracker

    root, name, index, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    marker = sys.argv[5]
    ctx = ToolContext(root=root, reads=ReadTracker())
    retries = 0
    first = True
    while True:
        read = Read().call(ctx, {"file_path": name})
        assert not read.is_error, read.content
        if first:
            # Barrier: every worker has read the same version before anyone edits, so the
            # conflicts are certain rather than a matter of timing.
            (root / "barrier" / str(index)).touch()
            while len(list((root / "barrier").iterdir())) < workers:
                time.sleep(0.01)
            first = False
        edit = Edit().call(ctx, {
            "file_path": name,
            "old_string": marker,
            "new_string": f"- line from worker {index}\\n{marker}",
        })
        if not edit.is_error:
            break
        if "modified since read" not in edit.content:
            print(json.dumps({"error": edit.content}))
            sys.exit(1)
        retries += 1
    print(json.dumps({"retries": retries}))
    """
)


def test_sixteen_processes_each_append_a_line_and_all_survive(ws: Path) -> None:
    workers = 16
    journal = ws / "learning_journal.md"
    journal.write_text(f"# Journal\n\n{MARKER}\n")
    (ws / "barrier").mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(ws), journal.name, str(i), str(workers), MARKER],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        reports.append(json.loads(out))

    text = journal.read_text()
    for i in range(workers):
        assert text.count(f"- line from worker {i}\n") == 1, text
    assert text.startswith("# Journal\n\n")
    assert text.endswith(f"{MARKER}\n")
    assert text.count(MARKER) == 1
    # Everyone read the same version first, so all but one first attempt met a conflict.
    assert sum(r["retries"] for r in reports) >= workers - 1


def test_threads_rewriting_with_write_lose_nothing(ws: Path) -> None:
    """Read-modify-Write from 8 threads (8 runs): stale writes are refused, never applied."""
    notes = ws / "notes.md"
    notes.write_text("")
    errors: list[str] = []

    def agent(index: int) -> None:
        ctx = ToolContext(root=ws, reads=ReadTracker())
        while True:
            Read().call(ctx, {"file_path": "notes.md"})
            current = notes.read_text()  # what the model saw (same content, simpler to parse)
            result = Write().call(
                ctx, {"file_path": "notes.md", "content": current + f"thread {index}\n"}
            )
            if not result.is_error:
                return
            if "modified since read" not in result.content:
                errors.append(result.content)
                return

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    lines = notes.read_text().splitlines()
    assert sorted(lines) == sorted(f"thread {i}" for i in range(8))


def test_one_run_shared_by_threads_edits_consistently(ws: Path) -> None:
    """Sub-tasks of one run share its tracker; each edit lands exactly once."""
    journal = ws / "j.md"
    journal.write_text(f"{MARKER}\n")
    ctx = ToolContext(root=ws, reads=ReadTracker())
    Read().call(ctx, {"file_path": "j.md"})
    results = []

    def edit(index: int) -> None:
        results.append(
            Edit().call(
                ctx,
                {"file_path": "j.md", "old_string": MARKER, "new_string": f"t{index}\n{MARKER}"},
            )
        )

    threads = [threading.Thread(target=edit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(not r.is_error for r in results), [r.content for r in results]
    text = journal.read_text()
    assert sorted(text.splitlines()[:-1]) == sorted(f"t{i}" for i in range(8))


def test_edit_of_the_journal_waits_for_the_journal_stores_lock(ws: Path) -> None:
    """Edit and the journal store's append share one lock, so they never interleave."""
    from journal_agent.journal.store import JournalStore
    from journal_agent.paths import JOURNAL_FILE

    journal = ws / JOURNAL_FILE
    journal.write_text(f"# Journal\n{MARKER}\n")
    ctx = ToolContext(root=ws, reads=ReadTracker())
    Read().call(ctx, {"file_path": JOURNAL_FILE})
    results = []
    edit = threading.Thread(
        target=lambda: results.append(
            Edit().call(
                ctx, {"file_path": JOURNAL_FILE, "old_string": MARKER, "new_string": "edited"}
            )
        )
    )
    with JournalStore(ws).lock():
        edit.start()
        edit.join(timeout=1.0)
        assert edit.is_alive()  # blocked on the store's lock, file untouched
        assert MARKER in journal.read_text()
    edit.join(timeout=60)
    assert not results[0].is_error, results[0].content
    assert journal.read_text() == "# Journal\nedited\n"
