"""The entries' titles beside the search index, for the Claude Code hooks: ``.journal/titles.tsv``.

The hooks name entries on every tool call that touches cited code (capture/touch.py) and when
our agents start (capture/handed.py); reading a title from the search index costs them
sqlite3's import, about 4 ms of the 20 they may take (#33). So the index writes this file each
time it brings itself in line with the journal (``SearchIndex._bump``, inside its transaction:
two writers take turns), replaced whole through the room. Its first line holds the size and
mtime of the journal it was written from: a journal changed since (another hand's edit, an
append the index did not take in) makes it stale, and the hooks read the index as before.

Format: ``journal-agent titles 1 SIZE MTIME_NS``, then ``ID<TAB>TITLE`` per entry, then a last
line ``.`` (a file cut short is not read). Stdlib only, no ``re`` or ``json``: the hooks run it
under ``python3 -I -S``.
"""

from __future__ import annotations

import os

from journal_agent import confined

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Iterable

NAME = os.path.join(".journal", "titles.tsv")
JOURNAL = "learning_journal.md"  # (journal_agent.paths.JOURNAL_FILE: pathlib, not for the hooks)
MAGIC = "journal-agent titles 1"
END = b"\n.\n"
MAX_BYTES = 32 << 20  # a journal of 100,000 entries holds about 4 MB of ids and titles


def write(root: str | os.PathLike[str], size: int, mtime_ns: int, rows: Iterable[tuple]) -> None:
    """Replace the file with the ``(id, title)`` of the index as it now stands for the journal
    of ``size`` bytes written at ``mtime_ns``. Never fails the index: when it cannot be written
    (a read-only disk, a link planted there) the old one stays, stale, and is not read."""
    head = f"{MAGIC} {size} {mtime_ns}\n"
    lines = [
        f"{entry}\t{title}\n"
        for entry, title in rows
        if "\t" not in entry and "\n" not in entry and "\n" not in title
    ]
    try:  # noqa: SIM105 (contextlib costs the hooks an import)
        confined.replace(root, NAME, (head + "".join(lines)).encode() + END[1:], durable=False)
    except OSError:
        pass


def ensure(root: str) -> None:
    """Write the file from the search index when it is not of the journal there and the index
    is (an index brought in line before this file existed, or whose write of it failed): the
    detached child SessionStart and SessionEnd start, which may import sqlite3."""
    st = confined.lstat(root, JOURNAL)
    if st is None or _head(root) == f"{MAGIC} {st.st_size} {st.st_mtime_ns}\n".encode():
        return
    import sqlite3

    path = confined.sqlite_file(root, os.path.join(root, ".journal", "index.sqlite"))
    if path is None:
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2)
        try:
            meta = dict(
                conn.execute("SELECT key, value FROM meta WHERE key IN ('size', 'mtime_ns')")
            )
            if meta != {"size": str(st.st_size), "mtime_ns": str(st.st_mtime_ns)}:
                return  # the index is behind too: its next use writes both
            rows = conn.execute("SELECT id, title FROM entries ORDER BY start").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return
    write(root, st.st_size, st.st_mtime_ns, rows)


def _head(root: str) -> bytes | None:
    try:
        f = confined.open_read(root, NAME)
    except OSError:
        return None
    if f is None:
        return None
    with f:
        return f.readline(256)


def read(root: str, ids: list[str]) -> dict[str, str] | None:
    """The titles of ``ids`` (an id the file does not hold is no entry of the journal), or None
    when the file is missing, odd (a link, cut short) or was written from another journal than
    the one there now."""
    st = confined.lstat(root, JOURNAL)
    if st is None:
        return None
    data = confined.read_planted(root, NAME, MAX_BYTES)
    if data is None or not data.endswith(END):
        return None
    head = f"{MAGIC} {st.st_size} {st.st_mtime_ns}\n".encode()
    if not data.startswith(head):
        return None
    out: dict[str, str] = {}
    for entry in ids:
        key = b"\n" + entry.encode("utf-8", "surrogateescape") + b"\t"
        at = data.find(key, len(head) - 1)
        if at != -1:
            start = at + len(key)
            out[entry] = data[start : data.find(b"\n", start)].decode("utf-8", "replace")
    return out
