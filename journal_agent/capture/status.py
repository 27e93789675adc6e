"""The one line SessionStart gives the model, and the cached facts behind it.

Counting what is due must cost milliseconds: reviews due are read from ``.journal/review.json``
(the FSRS cards' due dates), waiting moments from the inbox, proposed session rows from
``.journal/capture/proposals/``. Stale code references need every referenced file hashed, so a
detached child (``refresh``) computes them after a session ends and leaves the count in
``.journal/capture/status.json``; SessionStart only reads it.

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

import bisect
import json
import time
from pathlib import Path

from journal_agent.capture.store import waiting_count

REFRESH_EVERY = 600  # seconds: a status younger than this is not recomputed


def capture_dir(root: Path) -> Path:
    return Path(root) / ".journal" / "capture"


def proposals_dir(root: Path) -> Path:
    return capture_dir(root) / "proposals"


def due_reviews(root: Path, now: float | None = None) -> int:
    """Reviewed cards due by ``now`` (POSIX seconds; default now). Items never reviewed are not
    counted.

    review.json keeps every review ever made and grows for years; its cards' due dates are
    cached in ``.journal/capture/due.json`` (keyed by review.json's size and mtime), so a
    session start parses the big file only after a review changed it.
    """
    path = Path(root) / ".journal" / "review.json"
    try:
        st = path.stat()
    except OSError:
        return 0
    key = f"{st.st_size}:{st.st_mtime_ns}"
    cache = capture_dir(root) / "due.json"
    try:
        cached = json.loads(cache.read_bytes())
        dues = cached["due"] if cached["key"] == key else None
    except (OSError, ValueError, KeyError, TypeError):
        dues = None
    if dues is None:
        dues = _due_dates(path)
        try:  # noqa: SIM105 (contextlib is one more import for every session start)
            write_json(cache, {"key": key, "due": dues})
        except OSError:
            pass  # a read-only project: count from the file every time
    return bisect.bisect_right(dues, time.time() if now is None else now)


def _due_dates(path: Path) -> list[float]:
    """The due dates (POSIX seconds, sorted) of every card in review.json."""
    from datetime import datetime  # only when review.json changed since the cache

    try:
        cards = json.loads(path.read_bytes())["cards"].values()
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


def stale_references(root: Path) -> int:
    """The count the last refresh left, 0 when there is none yet."""
    try:
        return int(json.loads((capture_dir(root) / "status.json").read_bytes())["stale_refs"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def proposed_rows(root: Path) -> int:
    try:
        return sum(1 for p in proposals_dir(root).iterdir() if p.suffix == ".json")
    except OSError:
        return 0


def session_start_line(root: Path) -> str:
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
    stale = stale_references(root)
    if stale:
        parts.append(
            f"{_n(stale, 'code reference')} in the journal now pointing at changed lines "
            "(`journal-agent journal check`)"
        )
    rows = proposed_rows(root)
    if rows:
        parts.append(
            f"{_n(rows, 'session row')} proposed for the ledger (/journal-agent:end-session)"
        )
    return f"journal-agent: {'; '.join(parts)}." if parts else ""


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def needs_refresh(root: Path) -> bool:
    try:
        age = time.time() - (capture_dir(root) / "status.json").stat().st_mtime
    except OSError:
        return (Path(root) / ".journal" / "refs.jsonl").exists()
    return age > REFRESH_EVERY


def refresh(root: Path) -> None:
    """Recompute the cached facts (stale references) and replace ``status.json``."""
    from journal_agent.journal.refs import CodeRef, FileCache, RefStore, content_hash

    root = Path(root)
    live = _entry_ids(root)
    files = FileCache(root)
    stale = 0
    for entry, refs in RefStore(root / ".journal" / "refs.jsonl").load().items():
        if live is not None and entry not in live:
            continue
        for key, recorded in refs.items():
            path, _, span = key.rpartition(":")
            start, _, end = span.partition("-")
            try:
                ref = CodeRef(path, int(start), int(end or start), 0)
            except ValueError:
                continue
            if content_hash(ref, files) != recorded:
                stale += 1
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(capture_dir(root) / "status.json", {"stale_refs": stale, "computed": now})


def _entry_ids(root: Path) -> set[str] | None:
    """The ids of the entries the search index knows, or None without an index."""
    import sqlite3

    path = root / ".journal" / "index.sqlite"
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            return {row[0] for row in conn.execute("SELECT id FROM entries")}
    except sqlite3.Error:
        return None


def write_json(path: Path, data: object, *, durable: bool = False) -> None:
    """Replace ``path`` whole (journal_agent.atomic): a reader never sees half of it."""
    from journal_agent.atomic import atomic_write

    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n", durable=durable)
