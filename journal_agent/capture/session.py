"""What one Claude Code session did, and the 📚 session row it proposes for the ledger.

Each Stop updates ``.journal/capture/sessions/<session id>.json``: how far into the transcript
the capture has read (so the next turn starts there), the files edited, the moments captured.
SessionEnd only moves that file to ``.journal/capture/ended/`` (a rename: the session can end
once, and nothing is parsed inside Claude Code's 1.5 s budget) and starts the detached child,
which turns each ended session into a proposal, ``.journal/capture/proposals/<date>-<id>.json``
— ledger operations that ``journal-agent ledger apply FILE`` (or /end-session, or
``journal-agent inbox session --apply``) applies. Nothing here writes the ledger itself.

Stdlib only and light (the hooks import it under ``python3 -I -S``; see status.py).
"""

from __future__ import annotations

import os
import time

from journal_agent import confined
from journal_agent.capture.status import capture_dir, proposals_dir, read_json, write_json

FILES_NAMED = 4  # files named in a proposed row; the rest are counted
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _name(session_id: str) -> str:
    """``session_id`` as a file name: its letters, digits, ``_`` and ``-`` (at most 64)."""
    return "".join(c for c in session_id if c in _SAFE)[:64] or "unknown"


def state_path(root: str | os.PathLike[str], session_id: str) -> str:
    return os.path.join(capture_dir(root), "sessions", f"{_name(session_id)}.json")


def ended_dir(root: str | os.PathLike[str]) -> str:
    return os.path.join(capture_dir(root), "ended")


def load_state(root: str | os.PathLike[str], session_id: str) -> dict[str, object]:
    try:
        data = read_json(root, state_path(root, session_id))
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"session_id": session_id, "started": now, "offset": 0, "files": [], "moments": 0}


def save_state(root: str | os.PathLike[str], state: dict[str, object]) -> None:
    write_json(root, state_path(root, str(state.get("session_id", ""))), state)


def end(root: str | os.PathLike[str], session_id: str) -> bool:
    """SessionEnd's part: move the session's state to ``ended/`` for the detached child; False
    when the session left none (it captured nothing and edited nothing)."""
    source = state_path(root, session_id)
    if confined.lstat(root, source) is None:
        return False  # (and a project the session never touched stays untouched)
    target = os.path.join(ended_dir(root), f"{_name(session_id)}.{time.time_ns()}.json")
    # False: a second SessionEnd of the session got there first. A link at either end (a
    # committed `ended -> ~/.ssh`) is confined.Refused: nothing is moved into or out of it.
    return confined.rename(root, source, target, overwrite=False)


def propose_ended(root: str | os.PathLike[str]) -> list[str]:
    """The detached child's part: a proposal for every ended session, each state file removed
    once its proposal is written; returns the proposals' paths. Callers hold a lock."""
    folder = ended_dir(root)
    # Listed and removed through confined: `ended` as a committed link to ~/.ssh is refused
    # (confined.Refused), never listed, and nothing in the folder it names is removed.
    names = confined.listdir(root, folder)
    out = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            state = read_json(root, path)
        except (OSError, ValueError):
            state = None
        proposal = propose_row(root, state) if isinstance(state, dict) else None
        if proposal:
            out.append(proposal)
        try:  # noqa: SIM105 (contextlib costs the hooks an import)
            confined.unlink(root, path)
        except confined.Refused:
            pass  # a folder planted under ended/: left for doctor to name
    return out


def propose_row(root: str | os.PathLike[str], state: dict[str, object]) -> str | None:
    """Turn a session's state into a proposed 📚 row; None when the session did nothing."""
    named = state.get("files")
    files = [str(f) for f in named] if isinstance(named, list) else []  # JSON: a list we wrote
    moments = int(str(state.get("moments") or 0))
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
    session_id = str(state.get("session_id") or "")
    path = os.path.join(proposals_dir(root), f"{date}-{_name(session_id)[:8]}.json")
    operation = {"op": "add_session", "date": date, "topic": topic, "outcome": outcome}
    write_json(root, path, {"session_id": session_id, "operations": [operation]}, durable=True)
    return path


def _entries_dated(root: str | os.PathLike[str], date: str) -> list[str]:
    """Titles of the journal entries the search index has for ``date`` (none without one)."""
    import sqlite3

    try:
        path = confined.sqlite_file(root, os.path.join(root, ".journal", "index.sqlite"))
    except OSError:
        return []
    if path is None:
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            rows = conn.execute("SELECT title FROM entries WHERE date = ? ORDER BY line", (date,))
            return [str(r[0]) for r in rows]
    except sqlite3.Error:
        return []
