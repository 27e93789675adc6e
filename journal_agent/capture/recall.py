"""Entries related to a prompt, looked up by UserPromptSubmit in the search index.

Cheap by construction: each telling word of the prompt is one FTS5 lookup capped at
``COMMON`` rows (a word in more entries than that says nothing of the topic and is dropped),
and an entry is related when it holds at least two of the prompt's telling words and no other
entry holds more. The result is
logged to ``.journal/capture/recall.jsonl`` (entry ids and titles, never the prompt) and given
to the model only when ``capture.recall_inject`` is on: its precision is not measured yet.

Stdlib only (the hooks import it under ``python3 -I -S``); the index is opened read-only.
No ``re``: a prompt is split into words by one ``bytes.translate`` (see :func:`words`), which
spares every prompt the regex machinery's import (about 7 ms of CPU).
"""

from __future__ import annotations

import os
import sqlite3

from journal_agent.terminal_text import one_line

COMMON = 200
WORDS = 10  # telling words looked up per prompt
SHOWN = 3
TITLE_LIMIT = 120  # characters of a title logged or injected (entry titles are a line)
ID_LIMIT = 80
_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Every byte but an ASCII letter or digit becomes a space.
_SPACES = bytes(c if c in _ALNUM else 32 for c in range(256))
# fmt: off
_STOP = frozenset(
    """that this with from have what when which where there their about would could should
    into than then them they does doing done been being were will your yours just also like
    some more most much many very only over under after before because while here make made
    want need know think please help look file files code line lines work works using used
    show tell give explain write read change changes run runs""".split()  # noqa: SIM905
)
# fmt: on


def words(prompt: str) -> list[str]:
    """The words the regex ``[A-Za-z][A-Za-z0-9]{3,}`` finds in ``prompt``, lower-cased: runs of
    ASCII letters and digits, leading digits dropped, four characters or more."""
    out = []
    for run in prompt.encode("ascii", "replace").translate(_SPACES).split():
        run = run.lstrip(b"0123456789")
        if len(run) >= 4:
            out.append(run.decode("ascii").lower())
    return out


def related(root: str | os.PathLike[str], prompt: str) -> list[dict[str, object]]:
    """Up to ``SHOWN`` entries sharing two or more telling words with ``prompt``, best first."""
    telling: list[str] = []
    for word in words(prompt):
        if word not in _STOP and word not in telling:
            telling.append(word)
    if len(telling) < 2:
        return []
    from journal_agent import confined

    # Checked through the room (a committed link or FIFO there is refused, never opened).
    path = confined.sqlite_file(root, os.path.join(root, ".journal", "index.sqlite"))
    if path is None:
        return []
    matched: dict[int, int] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2) as conn:
        for word in telling[:WORDS]:
            rows = conn.execute(
                "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? LIMIT ?",
                (f'"{word}"', COMMON),
            ).fetchall()
            if len(rows) >= COMMON:
                continue
            for (rowid,) in rows:
                matched[rowid] = matched.get(rowid, 0) + 1
        best = sorted((r for r in matched.items() if r[1] >= 2), key=lambda r: (-r[1], r[0]))
        # Only the entries sharing the most words: a runner-up sharing fewer is usually a
        # neighbouring topic, and naming it costs precision (benchmarks/bench_recall.py).
        top = best[0][1] if best else 0
        out = []
        for rowid, count in [r for r in best if r[1] == top][:SHOWN]:
            row = conn.execute("SELECT id, title FROM entries WHERE rowid = ?", (rowid,)).fetchone()
            if row:
                title = _bounded(row[1], TITLE_LIMIT)
                out.append({"id": _bounded(row[0], ID_LIMIT), "title": title, "matched": count})
    return out


def _bounded(value: object, limit: int) -> str:
    """A title or id from the index (a journal a cloned repository committed, maybe) as it may
    be logged and injected: one line, control characters written out, no double quote (it
    quotes titles below), at most ``limit`` characters."""
    return one_line(str(value).replace('"', "'"), limit)


def context_line(hits: list[dict[str, object]]) -> str:
    """The sentence injected when ``recall_inject`` is on: each title quoted and bounded (a
    12,000-character "system notice" title reached the model), so it reads as what it is, the
    name of an entry."""
    named = "; ".join(
        f'"{_bounded(h["title"], TITLE_LIMIT)}" (id {_bounded(h["id"], ID_LIMIT)})'
        for h in hits[:SHOWN]
    )
    return (
        f"journal-agent: related entries in learning_journal.md: {named} "
        "(`journal-agent journal show ID`)."
    )
