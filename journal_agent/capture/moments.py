"""Stop and SubagentStop: the turn's learning moments, appended to the inbox.

A moment per ``★ Insight`` block (from ``last_assistant_message`` and the turn's other
assistant text), each with the files the turn edited (and their new lines) and the measurement
records it created; a turn that only measured gives one ``measurement`` moment. Private spans
are dropped before anything is looked at, secrets redacted before anything is written, and a
moment already in the inbox (same text) is not written again.

Light: the hooks import this under ``python3 -I -S`` (journal_agent/capture/store.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from journal_agent.capture import extract, store
from journal_agent.capture.transcript import Turn, read_turn


def capture_turn(
    root: Path, payload: dict[str, object], *, subagent: bool, log: Callable[[str], None]
) -> list[dict[str, object]]:
    """Capture one turn; returns the moments written (none when nothing was new)."""
    from journal_agent.capture import session

    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("agent_transcript_path" if subagent else "transcript_path")
    state = None if subagent else session.load_state(root, session_id)
    since = 0
    if state is not None and state.get("transcript") == transcript:
        since = int(str(state.get("offset") or 0))
    turn = Turn()
    if isinstance(transcript, str) and transcript:
        try:
            turn = _read_when_written(transcript, since, subagent)
        except OSError as exc:  # not written yet, or gone: the final message still counts
            log(f"transcript unreadable ({type(exc).__name__}: {exc.strerror or exc})")
    last = payload.get("last_assistant_message")
    texts = [*turn.texts, last] if isinstance(last, str) else turn.texts
    files = _relative(root, turn.edits)
    records = extract.records_created(turn.tool_results, root / ".journal" / "measurements")
    common = {
        "session_id": session_id,
        "prompt_id": str(payload.get("prompt_id") or turn.prompt_id),
        "agent": str(payload.get("agent_type") or "") if subagent else "",
        "files": files,
        "records": records,
    }
    moments = _moments(texts, records, common)
    if moments:
        seen = store.known_hashes(root)
        moments = [m for m in moments if m["hash"] not in seen]
        store.append(root, moments)
    # A session that captured nothing leaves no trace in the project (no state file).
    if state is not None and (moments or files or "transcript" in state):
        state["transcript"] = transcript
        state["offset"] = turn.end
        named = state.get("files")
        known = [str(f) for f in named] if isinstance(named, list) else []
        state["files"] = sorted({*known, *(str(f["path"]) for f in files)})
        state["moments"] = int(str(state.get("moments") or 0)) + len(moments)
        session.save_state(root, state)
    return moments


def _moments(
    texts: list[str], records: list[str], common: dict[str, object]
) -> list[dict[str, object]]:
    bodies: list[str] = []
    for text in texts:
        for body in extract.insights(text):
            if body not in bodies:
                bodies.append(body)
    out = [store.new_moment("insight", extract.redact(b), **common) for b in bodies]
    if not out and records:
        cited = ", ".join(f"[m:{r}]" for r in records)
        out.append(store.new_moment("measurement", f"Measured this turn: {cited}", **common))
    return out


def _relative(root: Path, edits: dict[str, list[tuple[int, int]]]) -> list[dict[str, object]]:
    """Edits inside the project, with paths relative to it; files elsewhere are left out."""
    base = os.path.realpath(root)
    out: list[dict[str, object]] = []
    for path, ranges in edits.items():
        full = os.path.realpath(path if os.path.isabs(path) else os.path.join(root, path))
        rel = os.path.relpath(full, base)
        if rel.startswith(".."):
            continue
        out.append({"path": rel.replace(os.sep, "/"), "lines": [list(r) for r in ranges]})
    return out


def _read_when_written(transcript: str, since: int, subagent: bool) -> Turn:
    """The turn, waiting a moment for a transcript not on disk yet: Claude Code 2.1.197 can run
    the Stop hook before it has flushed the session's first lines (seen on an idle machine)."""
    import time

    for _ in range(10):
        try:
            return read_turn(transcript, since=since, sidechain=subagent)
        except FileNotFoundError:
            time.sleep(0.03)
    return read_turn(transcript, since=since, sidechain=subagent)
