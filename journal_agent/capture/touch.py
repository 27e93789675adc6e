"""The journal speaks when its code is touched: PostToolUse on Read, Edit, MultiEdit, Write and
Grep names the entries that explain the lines the model just read, changed or found.

Named: the entries whose cited lines an edit changed, a focused Grep found (at most
:data:`~journal_agent.capture.touched.GREP_FOCUS` lines), or a Read showed as a real share of
what it read (a quarter: :data:`READ_SHARE`; a whole file read to edit one function is not
about its other entries); an Edit's hunks are compared with where the cited lines were in the
file just before it (a session's earlier edits move them: capture/cited_place.py), a Read's
window and a Grep's hits with where the session's last edit of the file left them
(capture/session_places.py), else, in a file the session did not edit, with the recorded
lines. These rules hold precision at 1.0 on both replay sets of
benchmarks/bench_touch_replay.py, where naming every overlap scored 0.37.

One line per entry (at most :data:`SHOWN`; capture/touch_line.py makes it, in at most 40
tokens): the lines it explains, their state now (fresh, moved to line N, changed) and the
command that opens it, whose id (the title's slug and a date) says the title. An entry is named
once per session. An edit that changes cited lines says so, and leaves a ``revise`` moment in
the inbox.

Fast by construction, and no model call: ``.journal/refs.jsonl`` is read whole as bytes and
only its lines that name the touched file are parsed (a C-level ``bytes.find``); an entry's
last line in the file wins, as :class:`journal_agent.journal.refs.RefStore` reads it; a cited
file's state is the hash of its cited lines now against the recorded one (the same
``window_hash``). The titles come from the search index, opened read-only.

A cloned project speaks only once trusted: when ``learning_journal.md`` or ``.journal/``'s
``refs.jsonl`` is tracked by git (a clone brought them: their titles would be someone else's
words in the model's context) the hook is silent until the user approved the project
(``journal-agent trust``). ``capture.recall_touch`` off (an approved settings file) or
``JOURNAL_AGENT_CAPTURE=0`` turns it off; a repository cannot turn it on.

Stdlib only, no ``re``, ``json`` or ``pathlib`` (the hooks run under ``python3 -I -S``).
"""

from __future__ import annotations

import os

from journal_agent import confined
from journal_agent.capture import edit_refs, refs_by_file, session_places
from journal_agent.capture.cited_place import placed, span, where
from journal_agent.capture.refs_by_file import mapped
from journal_agent.capture.touched import touched
from journal_agent.lightjson import dumps, loads

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

SHOWN = 3  # entries named per tool call
# Entries named in one session, at most: about 1,000 tokens (the replayed sessions of
# benchmarks/bench_touch_replay.py named 3 at most).
SESSION_MAX = 20
# How much a Read says about where the model is looking (benchmarks/bench_touch_replay.py,
# docs/plugin.md): it names an entry whose cited lines are at least a quarter of the lines it
# read (a whole file read to edit one function is not about the other entries on it).
READ_SHARE = 4  # (GREP_FOCUS: capture/touched.py)
MAX_SOURCE = 8 << 20  # bytes of a cited file hashed; a bigger one gets no state
MAX_JOURNAL = 2 << 20  # bytes of a journal whose headings are read when the index is not
ID_MARK = b"<!-- entry: "  # the line under a heading that holds the entry's id
SPOKEN = ".journal/capture/spoken.txt"  # "session entry" per line: named once per session
SPOKEN_TAIL = 256 << 10
CHANGED = "!changed"  # marks, in SPOKEN, an entry told that an edit changed its lines
TRACKED_NAMES = (b"learning_journal.md", b".journal/refs.jsonl")


def tracked_by_git(root: str, names: tuple[bytes, ...] = TRACKED_NAMES) -> bool:
    """Whether the git index above ``root`` names the journal or its references (or ``names``,
    relative to ``root``): a clone brought them (capture/git_tracked.py)."""
    from journal_agent.capture.git_tracked import tracked

    return tracked(root, names)


def trusted(root: str) -> bool:
    """The journal is the user's own (not brought by git), or they approved the project."""
    if not tracked_by_git(root):
        return True
    from journal_agent.trust_store import approvals

    return bool(approvals(root))


# -- which entries cite what was touched --------------------------------------------------------


def cited(
    root: str, rel: str, keep: Callable[[tuple[int, int]], bool] | None = None, index: bool = True
) -> Iterator[tuple[str, str, dict[str, object]]]:
    """``(entry id, ref key, anchor)`` of each reference to the file ``rel``, from each entry's
    last line of ``refs.jsonl``, newest first; lazily (a caller that has its three stops
    parsing). ``keep``: the cited lines wanted; a line none of whose keys it takes is not
    parsed. Where the index of cited files (capture/refs_by_file.py) can be had, from its rows;
    else (``index`` False: a row was just found out), or from a row whose line is not what it
    says, by searching ``refs.jsonl``."""
    st: list[os.stat_result] = []
    data = mapped(root, ".journal/refs.jsonl", st)
    if not data:
        return
    done: set[str] = set()  # entries yielded
    found = refs_by_file.rows(root, data, st[0].st_ino, rel) if index else None
    if found is not None:
        try:
            yield from refs_by_file.cited(data, rel, keep, found, done)
            return
        except refs_by_file.Stale:
            refs_by_file.drop(root)  # not ours as written: the next call builds it again
    yield from _searched(data, rel, keep, done)


def _searched(
    data: refs_by_file.Data,
    rel: str,
    keep: Callable[[tuple[int, int]], bool] | None,
    done: set[str],
) -> Iterator[tuple[str, str, dict[str, object]]]:
    """:func:`cited` by searching ``refs.jsonl`` for the file's name (an entry in ``done``
    passed over): a line none of whose keys ``keep`` takes is passed over unparsed (a whole-file
    Read of a file 2,000 references cite parses none of them)."""
    needle = b'"' + rel.encode("utf-8", "surrogateescape") + b":"
    seen: set[str] = set(done)
    at = data.rfind(needle)
    while at != -1:
        if keep is not None and not _keeps(data, at + len(needle), keep):
            # (an older line of an entry passed over here is found stale below)
            at = data.rfind(needle, 0, at)
            continue
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end == -1 else end
        at = data.rfind(needle, 0, start)
        try:
            item = loads(data[start:end].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue  # a line torn by a crash
        if not isinstance(item, dict) or not isinstance(item.get("entry"), str):
            continue
        entry = item["entry"]
        if entry in seen:
            continue
        seen.add(entry)
        if data.find(b'"entry": ' + dumps(entry).encode() + b",", end) != -1:
            continue  # a later line of the entry (the one that counts) no longer cites this file
        anchors = item.get("anchors") or item.get("refs")
        if not isinstance(anchors, dict):
            continue
        for key, anchor in anchors.items():
            if isinstance(key, str) and key.startswith(rel + ":"):
                yield entry, key, anchor if isinstance(anchor, dict) else {"hash": anchor}


def _keeps(data: refs_by_file.Data, at: int, keep: Callable[[tuple[int, int]], bool]) -> bool:
    """Whether the key whose lines start at ``at`` (``N-M"``) names lines ``keep`` takes, read
    from the bytes before its line is parsed (called for every reference to the file)."""
    head = data[at : at + 24]
    first, _, last = head[: head.find(b'"')].partition(b"-")
    try:
        return keep((int(first), int(last or first)))
    except ValueError:
        return False


def overlaps(ref: tuple[int, int], touched: list[tuple[int, int]] | None) -> bool:
    """``touched`` None: the whole file."""
    return touched is None or any(a <= ref[1] and ref[0] <= b for a, b in touched)


# -- the state of cited lines now ---------------------------------------------------------------


def file_lines(root: str, rel: str) -> list[bytes] | None:
    """The file's lines as the reference checks split them, read through the room (a link is
    no file of the workspace: no state), or None."""
    data = confined.read_planted(root, rel, MAX_SOURCE, one_name=False)
    if data is None or len(data) > MAX_SOURCE:
        return None
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.rstrip(b"\r") for p in parts]


def state(lines: list[bytes] | None, ref: tuple[int, int], anchor: dict[str, object]) -> str:
    """``fresh``, ``moved to line N``, ``changed`` or ``""`` (unknown: no file, no hash)."""
    if lines is None or not isinstance(anchor.get("hash"), str):
        return ""
    at = where(lines, ref, anchor)
    return "changed" if at is None else "fresh" if at == ref[0] else f"moved to line {at}"


# -- the lines said ------------------------------------------------------------------------------


def spoken(root: str, session: str) -> set[str]:
    data = confined.read_tail(root, SPOKEN, SPOKEN_TAIL) or b""
    mark = session.encode() + b" "
    return {
        line[len(mark) :].decode("utf-8", "replace")
        for line in data.split(b"\n")
        if line.startswith(mark)
    }


def titles(root: str, ids: list[str]) -> dict[str, str]:
    """Entry titles: from the index's titles file when it was written from the journal as it
    is (no sqlite3 to import: journal/search/titles_file.py), else from the search index
    (read-only) when it holds them, else from the headings of a journal of at most
    :data:`MAX_JOURNAL` bytes; an entry found in none is named by its id."""
    from journal_agent.journal.search import titles_file

    current = titles_file.read(root, ids) if ids else {}
    if current is not None:
        return current
    import sqlite3

    out: dict[str, str] = {}
    path = confined.sqlite_file(root, os.path.join(root, ".journal", "index.sqlite"))
    if path is not None and ids:
        marks = ",".join("?" * len(ids))
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2) as conn:
                rows = conn.execute(f"SELECT id, title FROM entries WHERE id IN ({marks})", ids)
                out = {str(i): str(t) for i, t in rows}
        except sqlite3.Error:
            out = {}
    missing = [i for i in ids if i not in out]
    if missing:
        out.update(_headings(root, missing))
    return out


def _headings(root: str, ids: list[str]) -> dict[str, str]:
    """``## Title (date)`` headings whose id (the ``<!-- entry: ID -->`` line under it, else
    ``slug-date``) is one of ``ids``."""
    from journal_agent.capture.touch_line import ID_LIMIT, slug

    data = confined.read_planted(root, "learning_journal.md", MAX_JOURNAL)
    if not data or len(data) > MAX_JOURNAL:
        return {}
    wanted = set(ids)
    out: dict[str, str] = {}
    at = data.find(b"\n## ")
    while at != -1 and len(out) < len(wanted):
        end = data.find(b"\n", at + 1)
        heading = data[at + 4 : len(data) if end == -1 else end].decode("utf-8", "replace")
        title, _, date = heading.strip().rpartition(" (")
        entry = f"{slug(title)}-{date.rstrip(')')}"
        close = data.find(b" -->", end + 1, end + 1 + len(ID_MARK) + ID_LIMIT + 4)
        if end != -1 and close != -1 and data.startswith(ID_MARK, end + 1):
            # The id the entry holds under its heading (kept when the title is changed).
            entry = data[end + 1 + len(ID_MARK) : close].decode("utf-8", "replace")
        if entry in wanted:
            out.setdefault(entry, title)
        at = data.find(b"\n## ", at + 1)
    return out


class _Lines:
    """A touched file's lines, read once, and only when a reference to it is looked at."""

    def __init__(self, root: str, rel: str) -> None:
        self.root, self.rel = root, rel
        self._lines: list[bytes] | None = None

    def get(self) -> list[bytes]:
        if self._lines is None:
            self._lines = file_lines(self.root, self.rel) or []
        return self._lines


def _looked_at(
    ranges: list[tuple[int, int]] | None, read: bool, lines: _Lines
) -> Callable[[tuple[int, int]], bool]:
    """Which cited lines the call was about: those it touched; for a Read, those that are at
    least 1/:data:`READ_SHARE` of the lines it showed (``ranges`` None: the whole file; a
    window past the end is cut there). The file is read at the first reference to it."""
    if not read:
        return lambda ref: overlaps(ref, ranges)
    shown: list[int] = []

    def keep(ref: tuple[int, int]) -> bool:
        if not shown:
            size = len(lines.get())
            first, last = ranges[0] if ranges else (1, size)
            last = min(last, max(size, first))
            shown.extend((first, last, last - first + 1))
        first, last, count = shown
        return (min(ref[1], last) - max(ref[0], first) + 1) * READ_SHARE >= count

    return keep


def speak(root: str, payload: dict[str, object]) -> str:
    """The ``additionalContext`` for one PostToolUse, "" when nothing is to be said."""
    session = str(payload.get("session_id") or "")
    session = "".join(c for c in session if c.isalnum() or c in "-_")[:80] or "-"
    said = None
    picked: list[tuple[str, str, str, bool]] = []  # entry, key, state, edit changed it
    for rel, ranges, edited, read in touched(root, payload):
        lines = _Lines(root, rel)
        keep = _looked_at(ranges, read, lines)
        # An edit is compared with where the cited lines were just before it (a session's
        # earlier edits moved them): every reference to the file is looked at, from the rows
        # of the index of cited files (capture/edit_refs.py) when it can be had.
        before = edit_refs.Before(payload, lines.get) if edited and ranges is not None else None
        near = edit_refs.near(root, session, rel, lines.get, before, keep) if before else None
        # A Read or Grep after this session's edits of the file: where they left cited lines.
        moved = None if edited else session_places.Moved(root, session, rel)
        look = None if before else moved.widen(keep) if moved else keep
        rest = cited(root, rel, look, index=not before) if near is None else iter(())
        refs: Iterator[tuple] = iter(near) if near is not None else rest
        looked: list[tuple[str, str, dict[str, object]]] = []  # (an edit keeps where all are)
        for entry, key, anchor, *place in refs:
            said = spoken(root, session) if said is None else said
            if edited and near is None:
                looked.append((entry, key, anchor))
            ref = span(key)
            if ref is None or any(p[0] == entry for p in picked):
                continue
            here = place[0] if place else placed(before.get(), ref, anchor) if before else ref
            if not keep(moved.at(ref, anchor) if moved else here):
                continue
            from journal_agent.capture.touch_line import ID_LIMIT  # (only once one is cited)

            if len(entry) > ID_LIMIT or not entry.isprintable() or " " in entry:
                continue  # not an id of ours: no command would open it
            now = state(lines.get(), ref, anchor)
            changed = edited and now == "changed"
            # Named once a session; an edit that changes its lines is said all the same, once.
            if (entry + CHANGED if changed else entry) in said:
                continue
            picked.append((entry, key, now, changed))
            if len(picked) >= SHOWN:
                break
        if looked:  # the references not looked at yet are read on from ``refs``
            edit_refs.keep_places(root, session, rel, lines.get(), [*looked, *rest])
        if len(picked) >= SHOWN:
            break
    picked = _within_budget(picked, said or set())
    if not picked:
        return ""
    from journal_agent.capture.touch_line import line

    named = titles(root, [p[0] for p in picked])
    out = [
        line(entry, named.get(entry, entry), key, now, changed)
        for entry, key, now, changed in picked
    ]
    _remember(root, session, [p[0] + (CHANGED if p[3] else "") for p in picked])
    _revise(root, payload, [p for p in picked if p[3]], named)
    return "\n".join(out)


def _within_budget(
    picked: list[tuple[str, str, str, bool]], said: set[str]
) -> list[tuple[str, str, str, bool]]:
    """At most :data:`SESSION_MAX` entries named in a session (an edit's "your edit changed"
    is said all the same: it asks for a revision)."""
    room = SESSION_MAX - sum(1 for e in said if not e.endswith(CHANGED))
    out = []
    for item in picked:
        if item[3] or room > 0:
            out.append(item)
            room -= not item[3]
    return out


def _remember(root: str, session: str, entries: list[str]) -> None:
    """Note what this session was told (an entry's id, and ``id!changed`` for an edit)."""
    st = confined.lstat(root, SPOKEN)
    if st is not None and st.st_size > SPOKEN_TAIL:
        confined.rename(root, SPOKEN, SPOKEN + ".1")
    named = [e for e in entries if e.endswith(CHANGED)]
    lines = [*entries, *(e.removesuffix(CHANGED) for e in named)]
    confined.append(root, SPOKEN, "".join(f"{session} {e}\n" for e in lines))


def _revise(
    root: str,
    payload: dict[str, object],
    changed: list[tuple[str, str, str, bool]],
    named: dict[str, str],
) -> None:
    """A ``revise`` moment per entry whose cited lines an edit changed (written once)."""
    if not changed:
        return
    from journal_agent.capture.store import append, known_hashes, revise_moment

    known = known_hashes(root)
    moments = []
    for entry, key, now, _ in changed:
        rel, _, lines = key.rpartition(":")
        first, _, last = lines.partition("-")
        moment = revise_moment(
            entry,
            named.get(entry, entry),
            [key],
            "an edit in Claude Code changed them",
            f"{key}: {now} since the entry was written.",
            [{"path": rel, "lines": [[int(first), int(last or first)]]}],
            session_id=str(payload.get("session_id") or ""),
            prompt_id=str(payload.get("prompt_id") or ""),
            agent=str(payload.get("agent_type") or ""),
        )
        if moment["hash"] not in known:
            moments.append(moment)
    if moments:
        append(root, moments)
