"""Where a session's edits left cited lines (#33): an Edit, MultiEdit or Write of a cited file
finds each reference to it in the file now (capture/cited_place.py's ``where``), and the
references that are no longer at their recorded lines are kept here, per session and file, so
that a later Read or Grep of the file in the session is compared with where its cited lines
are, not with where they were when the entry was written (or last ``journal check --fix``):
a window at the function's new place names its entry, one at its old place (other code now)
names nothing.

``.journal/capture/places.txt``, a line per edit of a cited file::

    session <TAB> size <TAB> mtime_ns <TAB> inode <TAB> first-last:hash>now ... <TAB> path

appended through the room (a link planted there is refused, never written through); the last
line of a session's file wins. Once the next line would take it past :data:`MAX_BYTES`, it is
written whole instead, without the session's older lines of the file and its oldest lines,
down to half that (two sessions writing then can lose one's line: it compares with the
recorded lines, as before). The file's size, mtime and inode after the edit are kept with it:
once another hand changed the file, the line no longer matches and the recorded lines count
again (as ``journal check`` would find them). A Read of a file the session never edited costs
one small read.

Stdlib only (the hooks import it under ``python3 -I -S``).
"""

from __future__ import annotations

import os
import stat

from journal_agent import confined

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable

    # (recorded first line, last line, anchor hash) -> first line now
    Places = dict[tuple[int, int, str], int]

NAME = ".journal/capture/places.txt"
MAX_BYTES = 64 << 10  # the oldest lines give way past this


def _stamp(st: os.stat_result) -> bytes:
    return b"%d\t%d\t%d" % (st.st_size, st.st_mtime_ns, st.st_ino)


def _mark(session: str, rel: str) -> tuple[bytes, bytes]:
    """The start of a line's session field, and its path field, as bytes."""
    return session.encode() + b"\t", b"\t" + rel.encode("utf-8", "surrogateescape") + b"\n"


def current(root: str, session: str, rel: str, stamped: bool = True) -> Places | None:
    """The places this session's last edit of ``rel`` found, when the file is still as that
    edit left it (a plain file of the same size, mtime and inode); None when there are none.
    ``stamped`` False: whatever the file is now (an edit, to guess where its references were
    just before it: each guess is checked against the file's lines)."""
    head, tail = _mark(session, rel)
    found = _said(root, head, tail)
    if found is None:
        return None
    fields = found.split(b"\t", 5)
    if len(fields) < 6:
        return None
    if stamped:
        st = confined.lstat(root, rel)
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        if b"\t".join(fields[1:4]) != _stamp(st):
            return None  # changed since by another hand
    out: Places = {}
    for item in fields[4].split():
        span, _, now = item.partition(b">")
        lines, _, digest = span.partition(b":")
        first, _, last = lines.partition(b"-")
        try:
            out[(int(first), int(last), digest.decode())] = int(now)
        except (ValueError, UnicodeDecodeError):
            return None  # not a line of ours
    return out


def _said(root: str, head: bytes, tail: bytes) -> bytes | None:
    """The last line kept for a session's file (``_mark``), None when none is."""
    data = confined.read_planted(root, NAME, MAX_BYTES)
    found = None
    for line in (data[:-1] if data.endswith(b"\n") else data).split(b"\n") if data else ():
        if line.startswith(head) and (line + b"\n").endswith(tail):
            found = line  # (the last one wins)
    return found


class Moved:
    """Where this session's last edit of the file left its cited lines, when the file is still
    as it left it (capture/session_places.py); read at the first reference looked at."""

    def __init__(self, root: str, session: str, rel: str) -> None:
        self.args = (root, session, rel)
        self._spans: dict[tuple[int, int], list[int]] | None = None
        self._places: Places = {}

    def _get(self) -> dict[tuple[int, int], list[int]]:
        if self._spans is None:
            self._places = current(*self.args) or {}
            self._spans = {}
            for (first, last, _), now in self._places.items():
                self._spans.setdefault((first, last), []).append(now)
        return self._spans

    def widen(self, keep: Callable[[tuple[int, int]], bool]) -> Callable[[tuple[int, int]], bool]:
        """``keep`` of recorded lines, also taking those an edit moved to where it keeps (the
        index's rows say recorded lines only; :meth:`at` says which place is the one)."""

        def look(ref: tuple[int, int]) -> bool:
            moved = self._get().get(ref, ())
            return keep(ref) or any(keep((n, n + ref[1] - ref[0])) for n in moved)

        return look

    def at(self, ref: tuple[int, int], anchor: dict[str, object]) -> tuple[int, int]:
        """The cited lines where the session's edit left them (recorded when not moved)."""
        self._get()
        now = self._places.get((ref[0], ref[1], str(anchor.get("hash"))))
        return ref if now is None else (now, now + ref[1] - ref[0])


def keep(root: str, session: str, rel: str, places: Places) -> None:
    """Keep ``places`` for this session's ``rel`` as the file is now (nothing moved and
    nothing kept before: nothing written): appended, or written whole once it would pass
    :data:`MAX_BYTES`."""
    if "\n" in rel or "\0" in rel or "\t" in session:
        return
    head, tail = _mark(session, rel)
    st = confined.lstat(root, rel)
    line = None
    if st is not None and stat.S_ISREG(st.st_mode):
        said = b" ".join(b"%d-%d:%s>%d" % (a, b, h.encode(), n) for (a, b, h), n in places.items())
        line = head + _stamp(st) + b"\t" + said + tail
    kept = confined.lstat(root, NAME)
    if line is not None and (kept is None or kept.st_size + len(line) <= MAX_BYTES):
        if not places and (kept is None or _said(root, head, tail) is None):
            return  # nothing to say, nothing to take back
        try:  # noqa: SIM105 (contextlib costs the hooks an import)
            confined.append(root, NAME, line)
        except OSError:
            pass  # (a link planted there, a read-only disk: Reads compare with recorded lines)
        return
    data = confined.read_planted(root, NAME, MAX_BYTES) or b""
    lines = [
        x + b"\n"
        for x in data.split(b"\n")
        if x and not (x.startswith(head) and (x + b"\n").endswith(tail))
    ]
    if not places and len(lines) == data.count(b"\n"):
        return  # nothing to say, nothing to take back
    if places and line is not None:
        lines.append(line)
    while lines and sum(map(len, lines)) > MAX_BYTES // 2:  # (room for the next appends)
        lines.pop(0)
    try:  # noqa: SIM105 (contextlib costs the hooks an import)
        confined.replace(root, NAME, b"".join(lines), durable=False)
    except OSError:
        pass  # (a link planted there, a read-only disk: Reads compare with recorded lines)
