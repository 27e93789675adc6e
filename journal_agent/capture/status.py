"""The one line SessionStart gives the model, and the cached facts behind it.

Counting what is due must cost milliseconds: reviews due are read from ``.journal/review.json``
(the FSRS cards' due dates), waiting moments from the inbox, proposed session rows from
``.journal/capture/proposals/``. Code references need every referenced file hashed (and the
lines of the ones that no longer match looked for elsewhere), so a detached child (``refresh``)
counts them after a session ends and leaves the counts in ``.journal/capture/status.json``;
SessionStart only reads it. Changed and gone references are stale (the entry needs reading
again); moved ones are not: ``journal check --fix`` updates them, so they are named apart.

Stdlib only and light (the hooks import it under ``python3 -I -S``: paths are ``os.path``
strings, JSON is :mod:`journal_agent.lightjson`). Every file is reached through
:mod:`journal_agent.confined` from the project root: a link a clone committed under
``.journal/`` is never followed, read or written through.
"""

from __future__ import annotations

import bisect
import os
import time

from journal_agent import confined
from journal_agent.capture.store import waiting_count
from journal_agent.lightjson import dumps, loads

TYPE_CHECKING = False  # (typing itself is one more import for every hook)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

REFRESH_EVERY = 600  # seconds: a status younger than this is not recomputed
# How a draft `inbox draft` wrote begins (its header line: journal_agent/capture/drafts.py);
# the agents' own scratch drafts in the same folder carry none.
DRAFT_HEADER = b"<!-- journal-agent draft {"


def capture_dir(root: str | os.PathLike[str]) -> str:
    return os.path.join(root, ".journal", "capture")


def proposals_dir(root: str | os.PathLike[str]) -> str:
    return os.path.join(capture_dir(root), "proposals")


def read_json(root: str | os.PathLike[str], path: str) -> Any:
    """The JSON value in the file at ``path`` under ``root``; OSError (FileNotFoundError when
    it is missing, ``confined.Refused`` when it is not a plain file) or ValueError."""
    data = confined.read(root, path)
    if data is None:
        raise FileNotFoundError(path)
    return loads(data)


def due_reviews(root: str | os.PathLike[str], now: float | None = None) -> int:
    """Reviewed cards due by ``now`` (POSIX seconds; default now). Items never reviewed are not
    counted.

    review.json keeps every review ever made and grows for years; its cards' due dates are
    cached in ``.journal/capture/due.json`` (keyed by review.json's size and mtime), so a
    session start parses the big file only after a review changed it.
    """
    path = os.path.join(root, ".journal", "review.json")
    st = confined.lstat(root, path)
    if st is None:
        return 0
    key = f"{st.st_size}:{st.st_mtime_ns}"
    cache = os.path.join(capture_dir(root), "due.json")
    try:
        cached = read_json(root, cache)
        dues = cached["due"] if cached["key"] == key else None
    except (OSError, ValueError, KeyError, TypeError):
        dues = None
    if dues is None:
        dues = _due_dates(root, path)
        try:  # noqa: SIM105 (contextlib is one more import for every session start)
            write_json(root, cache, {"key": key, "due": dues})
        except OSError:
            pass  # a read-only project: count from the file every time
    return bisect.bisect_right(dues, time.time() if now is None else now)


def _due_dates(root: str | os.PathLike[str], path: str) -> list[float]:
    """The due dates (POSIX seconds, sorted) of every card in review.json."""
    from datetime import datetime  # only when review.json changed since the cache

    try:
        cards = read_json(root, path)["cards"].values()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    out = []
    for saved in cards:
        try:
            when = datetime.fromisoformat(saved["card"]["due"])
        except (KeyError, TypeError, ValueError):
            continue
        if when.tzinfo is not None:
            out.append(when.timestamp())
    return sorted(out)


def reference_counts(root: str | os.PathLike[str]) -> tuple[int, int]:
    """``(stale, moved)`` as the last refresh left them, ``(0, 0)`` when there is none yet."""
    try:
        saved = read_json(root, os.path.join(capture_dir(root), "status.json"))
    except (OSError, ValueError):
        return 0, 0
    return _count(saved, "stale_refs"), _count(saved, "moved_refs")


def _count(saved: object, key: str) -> int:
    value = saved.get(key, 0) if isinstance(saved, dict) else 0
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def proposed_rows(root: str | os.PathLike[str]) -> int:
    try:
        return sum(1 for n in confined.listdir(root, proposals_dir(root)) if n.endswith(".json"))
    except OSError:
        return 0


def waiting_drafts(root: str | os.PathLike[str]) -> int:
    """Drafts waiting to be accepted: a listing of ``.journal/drafts/`` (paths.drafts_dir) and
    the first bytes of each ``.md`` there. Symlinks and anything but a regular file are not
    drafts (as drafts.store reads them), and a FIFO there cannot block the session's start."""
    folder = os.path.join(root, ".journal", "drafts")
    try:
        names = [n for n in confined.listdir(root, folder) if n.endswith(".md")]
    except OSError:
        return 0
    count = 0
    for name in names:
        try:
            f = confined.open_read(root, os.path.join(folder, name))
        except OSError:
            continue  # a link, a FIFO, a directory named *.md: not a draft
        if f is not None:
            with f:
                count += f.read(len(DRAFT_HEADER)) == DRAFT_HEADER
    return count


def session_start_line(root: str | os.PathLike[str]) -> str:
    """One sentence of facts for the model, "" when nothing is due."""
    parts = []
    due = due_reviews(root)
    if due:
        parts.append(f"{_n(due, 'review')} due (`journal-agent review`)")
    waiting = waiting_count(root)
    if waiting:
        parts.append(
            f"{_n(waiting, 'captured learning moment')} waiting in the inbox "
            "(/journal-agent:learn or `journal-agent inbox`)"
        )
    drafts = waiting_drafts(root)
    if drafts:
        parts.append(f"{_n(drafts, 'draft')} to accept (`journal-agent inbox drafts`)")
    stale, moved = reference_counts(root)
    if stale:
        parts.append(
            f"{_n(stale, 'code reference')} in the journal now pointing at changed lines "
            "(`journal-agent journal check`)"
        )
    if moved:
        noun = "reference" if stale else "code reference"
        parts.append(f"{_n(moved, noun)} moved (`journal-agent journal check --fix`)")
    rows = proposed_rows(root)
    if rows:
        parts.append(
            f"{_n(rows, 'session row')} proposed for the ledger (/journal-agent:end-session)"
        )
    return f"journal-agent: {'; '.join(parts)}." if parts else ""


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def needs_refresh(root: str | os.PathLike[str]) -> bool:
    """No status yet, one older than REFRESH_EVERY, or one older than the last change to the
    recorded references (an append, a refresh, `check --fix`)."""
    refs = confined.lstat(root, os.path.join(root, ".journal", "refs.jsonl"))
    status = confined.lstat(root, os.path.join(capture_dir(root), "status.json"))
    if status is None:
        return refs is not None
    computed = status.st_mtime
    recorded = refs.st_mtime if refs is not None else 0.0
    return time.time() - computed > REFRESH_EVERY or recorded > computed


def refresh(root: str | os.PathLike[str]) -> None:
    """Recompute the cached facts (stale and moved references) and replace ``status.json``.

    Each recorded reference is located as ``journal check`` locates it: changed or gone lines
    are stale, lines found unchanged elsewhere are moved."""
    from pathlib import Path  # the detached child's: nobody waits for it

    from journal_agent.journal.refs import CodeRef, FileCache, RefStore
    from journal_agent.journal.relocate import Relocator

    root = Path(root)
    live = _entry_ids(root)
    relocator = Relocator(root, FileCache(root))
    counts = {"changed": 0, "gone": 0, "moved": 0}
    # Each entry's anchors read when its turn comes: the child's memory is bounded by one
    # line of refs.jsonl, not the file (capture/limits.py holds it to 512 MiB).
    recorded = RefStore(root / ".journal" / "refs.jsonl").anchors_on_disk()
    for entry in recorded:
        if live is not None and entry not in live:
            continue
        anchors = recorded[entry]
        for key, anchor in anchors.items():
            path, _, span = key.rpartition(":")
            start, _, end = span.partition("-")
            try:
                ref = CodeRef(path, int(start), int(end or start), 0)
            except ValueError:
                continue
            state = relocator.locate(ref, anchor).state
            if state in counts:
                counts[state] += 1
    recorded.close()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    facts = {
        "stale_refs": counts["changed"] + counts["gone"],
        "moved_refs": counts["moved"],
        "computed": now,
    }
    write_json(root, os.path.join(capture_dir(root), "status.json"), facts)


def _entry_ids(root: Path) -> set[str] | None:
    """The ids of the journal's entries as the search index knows them, or None when there is
    no index or it is behind the journal (then every recorded entry counts: an index built
    before the last append would otherwise hide that entry's references)."""
    import sqlite3

    try:
        st = confined.lstat(root, root / "learning_journal.md")
        path = confined.sqlite_file(root, root / ".journal" / "index.sqlite")
        if st is None or path is None:
            return None
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if (meta.get("size"), meta.get("mtime_ns")) != (str(st.st_size), str(st.st_mtime_ns)):
                return None
            return {row[0] for row in conn.execute("SELECT id FROM entries")}
    except (OSError, sqlite3.Error):
        return None


def write_json(
    root: str | os.PathLike[str], path: str, data: object, *, durable: bool = False
) -> None:
    """Replace ``path`` under ``root`` whole (journal_agent.confined): a reader never sees half
    of it. A dict is written one key a line, for whoever opens the file."""
    if isinstance(data, dict) and data:
        text = "{\n" + ",\n".join(f" {dumps(str(k))}: {dumps(v)}" for k, v in data.items()) + "\n}"
    else:
        text = dumps(data)
    confined.replace(root, path, text + "\n", durable=durable)
