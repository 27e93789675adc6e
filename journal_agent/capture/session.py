"""What one Claude Code session did, and the 📚 session row it proposes for the ledger.

Each Stop updates ``.journal/capture/sessions/<session id>.json``: how far into the transcript
the capture has read (so the next turn starts there), the files edited, the moments captured.
SessionEnd turns it into a proposal, ``.journal/capture/proposals/<date>-<id>.json`` — ledger
operations that ``journal-agent ledger apply FILE`` (or /end-session, or
``journal-agent inbox session --apply``) applies. Nothing here writes the ledger itself.

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from journal_agent.capture.status import capture_dir, proposals_dir, write_json

FILES_NAMED = 4  # files named in a proposed row; the rest are counted


def _name(session_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:64] or "unknown"


def state_path(root: Path, session_id: str) -> Path:
    return capture_dir(root) / "sessions" / f"{_name(session_id)}.json"


def load_state(root: Path, session_id: str) -> dict[str, object]:
    try:
        data = json.loads(state_path(root, session_id).read_bytes())
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"session_id": session_id, "started": now, "offset": 0, "files": [], "moments": 0}


def save_state(root: Path, state: dict[str, object]) -> None:
    write_json(state_path(root, str(state.get("session_id", ""))), state)


def propose_row(root: Path, session_id: str) -> Path | None:
    """Turn the session's state into a proposed 📚 row; None when the session did nothing."""
    state = load_state(root, session_id)
    named = state.get("files")
    files = [str(f) for f in named] if isinstance(named, list) else []  # JSON: a list we wrote
    moments = int(str(state.get("moments") or 0))
    state_path(root, session_id).unlink(missing_ok=True)
    if not files and not moments:
        return None
    date = str(state.get("started", ""))[:10] or time.strftime("%Y-%m-%d", time.gmtime())
    titles = _entries_dated(root, date)
    named = ", ".join(files[:FILES_NAMED]) + (
        f" (+{len(files) - FILES_NAMED} more)" if len(files) > FILES_NAMED else ""
    )
    topic = "; ".join(titles[:3]) if titles else (f"worked on {named}" if files else "study")
    outcome = (
        f"{len(titles)} journal entr{'y' if len(titles) == 1 else 'ies'} dated {date}, "
        f"{moments} learning moment{'' if moments == 1 else 's'} captured"
        + (f"; files: {named}" if files else "")
    )
    path = proposals_dir(root) / f"{date}-{_name(session_id)[:8]}.json"
    write_json(
        path,
        {
            "session_id": session_id,
            "operations": [{"op": "add_session", "date": date, "topic": topic, "outcome": outcome}],
        },
        durable=True,
    )
    return path


def _entries_dated(root: Path, date: str) -> list[str]:
    """Titles of the journal entries the search index has for ``date`` (none without one)."""
    import sqlite3

    path = Path(root) / ".journal" / "index.sqlite"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            rows = conn.execute("SELECT title FROM entries WHERE date = ? ORDER BY line", (date,))
            return [str(r[0]) for r in rows]
    except sqlite3.Error:
        return []
