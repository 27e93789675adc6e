"""The one line SessionStart gives the model, and the cached facts behind it.

Counting what is due must cost milliseconds: reviews due are read from ``.journal/review.json``
(the FSRS cards' due dates), waiting moments from the inbox, proposed session rows from
``.journal/capture/proposals/``. Code references need every referenced file hashed (and the
lines of the ones that no longer match looked for elsewhere), so a detached child (``refresh``)
counts them after a session ends and leaves the counts in ``.journal/capture/status.json``;
SessionStart only reads it. Changed and gone references are stale (the entry needs reading
again); moved ones are not: ``journal check --fix`` updates them, so they are named apart.

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


def reference_counts(root: Path) -> tuple[int, int]:
    """``(stale, moved)`` as the last refresh left them, ``(0, 0)`` when there is none yet."""
    try:
        saved = json.loads((capture_dir(root) / "status.json").read_bytes())
    except (OSError, ValueError):
        return 0, 0
    return _count(saved, "stale_refs"), _count(saved, "moved_refs")


def _count(saved: object, key: str) -> int:
    value = saved.get(key, 0) if isinstance(saved, dict) else 0
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
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


def needs_refresh(root: Path) -> bool:
    """No status yet, one older than REFRESH_EVERY, or one older than the last change to the
    recorded references (an append, a refresh, `check --fix`)."""
    refs = Path(root) / ".journal" / "refs.jsonl"
    try:
        computed = (capture_dir(root) / "status.json").stat().st_mtime
    except OSError:
        return refs.exists()
    try:
        recorded = refs.stat().st_mtime
    except OSError:
        recorded = 0.0
    return time.time() - computed > REFRESH_EVERY or recorded > computed


def refresh(root: Path) -> None:
    """Recompute the cached facts (stale and moved references) and replace ``status.json``.

    Each recorded reference is located as ``journal check`` locates it: changed or gone lines
    are stale, lines found unchanged elsewhere are moved."""
    from journal_agent.journal.refs import CodeRef, FileCache, RefStore
    from journal_agent.journal.relocate import Relocator

    root = Path(root)
    live = _entry_ids(root)
    relocator = Relocator(root, FileCache(root))
    counts = {"changed": 0, "gone": 0, "moved": 0}
    for entry, anchors in RefStore(root / ".journal" / "refs.jsonl").anchors().items():
        if live is not None and entry not in live:
            continue
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
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    facts = {
        "stale_refs": counts["changed"] + counts["gone"],
        "moved_refs": counts["moved"],
        "computed": now,
    }
    write_json(capture_dir(root) / "status.json", facts)


def _entry_ids(root: Path) -> set[str] | None:
    """The ids of the journal's entries as the search index knows them, or None when there is
    no index or it is behind the journal (then every recorded entry counts: an index built
    before the last append would otherwise hide that entry's references)."""
    import sqlite3

    path = root / ".journal" / "index.sqlite"
    try:
        st = (root / "learning_journal.md").stat()
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if (meta.get("size"), meta.get("mtime_ns")) != (str(st.st_size), str(st.st_mtime_ns)):
                return None
            return {row[0] for row in conn.execute("SELECT id FROM entries")}
    except (OSError, sqlite3.Error):
        return None


def write_json(path: Path, data: object, *, durable: bool = False) -> None:
    """Replace ``path`` whole (journal_agent.atomic): a reader never sees half of it."""
    from journal_agent.atomic import atomic_write

    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n", durable=durable)
