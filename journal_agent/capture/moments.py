"""Stop and SubagentStop: the turn's learning moments, appended to the inbox.

A moment per ``★ Insight`` block (from ``last_assistant_message`` and the turn's other
assistant text), each with the files the turn edited (and their new lines) and the measurement
records it created; a turn that only measured gives one ``measurement`` moment. Private spans
are dropped before anything is looked at (across a message's text blocks, nested, or open to
its end), secrets redacted before anything is written, a moment already in the inbox (same
text) is not written again, and a turn adds at most ``MAX_MOMENTS``.

Light: the hooks import this under ``python3 -I -S`` (journal_agent/capture/store.py).
"""

from __future__ import annotations

import os

from journal_agent.capture import extract, store
from journal_agent.capture.transcript import Turn, read_turn

TYPE_CHECKING = False  # (collections.abc is one more import for every turn)
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_MOMENTS = 20  # a turn's moments at most: one turn can hold any number of Insight blocks


def capture_turn(
    root: str, payload: dict[str, object], *, subagent: bool, log: Callable[[str], None]
) -> list[dict[str, object]]:
    """Capture one turn; returns the moments written (none when nothing was new)."""
    from journal_agent.capture import session

    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("agent_transcript_path" if subagent else "transcript_path")
    state = None if subagent else session.load_state(root, session_id)
    since = 0
    if state is not None and state.get("transcript") == transcript:
        since = int(str(state.get("offset") or 0))
    last = payload.get("last_assistant_message")
    turn = Turn()
    if isinstance(transcript, str) and transcript:
        try:
            turn = _read_when_written(transcript, since, subagent, last)
        except OSError as exc:  # not written yet, or gone: the final message still counts
            log(f"transcript unreadable ({type(exc).__name__}: {exc.strerror or exc})")
        else:
            if not _holds_final(turn, last):
                log("the transcript lags the final message; captured the turn as far as written")
    texts = _private_removed(turn, last)
    files = _relative(root, turn.edits)
    records = extract.records_created(turn.tool_results, root)
    common = {
        "session_id": session_id,
        "prompt_id": str(payload.get("prompt_id") or turn.prompt_id),
        "agent": str(payload.get("agent_type") or "") if subagent else "",
        "files": files,
        "records": records,
    }
    moments = _moments(texts, records, common, store.known_hashes(root), log)
    if moments:
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


def _private_removed(turn: Turn, last: object) -> list[str]:
    """The turn's text blocks, then the final message, with every private span removed: across
    the blocks of each message (they share its id), nested, or left open to its end. The final
    message (the payload's ``last_assistant_message``, whole) is a message of its own."""
    out: list[str] = []
    start = 0
    for i in range(1, len(turn.texts) + 1):
        if i == len(turn.texts) or turn.messages[i] != turn.messages[start]:
            out += extract.private_removed(turn.texts[start:i])
            start = i
    if isinstance(last, str):
        out += extract.private_removed([last])
    return out


def _moments(
    texts: list[str],
    records: list[str],
    common: dict[str, object],
    known: set[str],
    log: Callable[[str], None],
) -> list[dict[str, object]]:
    """The turn's new moments: one per Insight not in the inbox yet, at most MAX_MOMENTS.

    Linear in the number of blocks (a set of what was seen; a turn of 60,000 tiny Insight
    blocks took 26 s with a list, over the 15 s Claude Code gives a hook), and only the kept
    ones are redacted and hashed; hooks.log says how many more there were."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    more = 0
    for text in texts:
        for body in extract.insights(text):
            key = " ".join(body.split())
            if key in seen:
                continue
            seen.add(key)
            if len(out) >= MAX_MOMENTS:
                more += 1
                continue
            moment = store.new_moment("insight", extract.redact(body), **common)
            if moment["hash"] not in known:
                known.add(str(moment["hash"]))
                out.append(moment)
    if more:
        log(
            f"this turn held {more} more Insight block(s) than the {MAX_MOMENTS} captured "
            f"(at most {MAX_MOMENTS} moments a turn); they were not captured"
        )
    if not out and not seen and records:
        cited = ", ".join(f"[m:{r}]" for r in records)
        moment = store.new_moment("measurement", f"Measured this turn: {cited}", **common)
        if moment["hash"] not in known:
            out.append(moment)
    return out


def _relative(root: str, edits: dict[str, list[tuple[int, int]]]) -> list[dict[str, object]]:
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


FLUSH_WAIT = 0.6  # seconds the hook waits at most for Claude Code to flush the turn


def _read_when_written(transcript: str, since: int, subagent: bool, last: object) -> Turn:
    """The turn, waiting a moment for a transcript that Claude Code has not flushed yet.

    Claude Code 2.1.197 can run the Stop hook before it has written the turn's last lines to
    the transcript (seen in tests/e2e: the turn's Edit and its result missing), or the file at
    all (an idle machine). The final message is written last, so the transcript holds the whole
    turn once it holds ``last`` (the payload's ``last_assistant_message``); until then, or
    until FLUSH_WAIT has passed, the hook reads again. A transcript that already has it costs
    no wait."""
    import time

    deadline = time.monotonic() + FLUSH_WAIT
    while True:
        try:
            turn = read_turn(transcript, since=since, sidechain=subagent)
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
        else:
            if _holds_final(turn, last) or time.monotonic() > deadline:
                return turn
        time.sleep(0.02)


def _holds_final(turn: Turn, last: object) -> bool:
    """Whether the turn read ends with the final message (always, when the payload has none)."""
    if not isinstance(last, str) or not last.strip():
        return True
    return bool(turn.texts) and last.rstrip().endswith(turn.texts[-1].rstrip())
