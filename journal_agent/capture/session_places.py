"""Where a session's edits left cited lines (#33): an Edit, MultiEdit or Write of a cited file
finds each reference to it in the file now (capture/cited_place.py's ``where``), and the
references that are no longer at their recorded lines are kept here, per session and file, so
that a later Read or Grep of the file in the session is compared with where its cited lines
are, not with where they were when the entry was written (or last ``journal check --fix``):
a window at the function's new place names its entry, one at its old place (other code now)
names nothing.

``.journal/capture/places.txt``, one line per session and edited file::

    session <TAB> size <TAB> mtime_ns <TAB> inode <TAB> first-last:hash>now ... <TAB> path

written whole through the room (a link planted there is refused, never written through). The
file's size, mtime and inode after the edit are kept with it: once another hand changed the
file, the line no longer matches and the recorded lines count again (as ``journal check`` would
find them). A Read of a file the session never edited costs one small read. Two sessions
writing at once can lose one's line: it then compares with the recorded lines, as before.

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


def current(root: str, session: str, rel: str) -> Places | None:
    """The places this session's last edit of ``rel`` found, when the file is still as that
    edit left it (a plain file of the same size, mtime and inode); None when there are none."""
    data = confined.read_planted(root, NAME, MAX_BYTES)
    if not data:
        return None
    head, tail = _mark(session, rel)
    found = None
    for line in (data[:-1] if data.endswith(b"\n") else data).split(b"\n"):
        if line.startswith(head) and (line + b"\n").endswith(tail):
            found = line  # (the last one wins)
    if found is None:
        return None
    fields = found.split(b"\t", 5)
    st = confined.lstat(root, rel)
    if len(fields) < 6 or st is None or not stat.S_ISREG(st.st_mode):
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
    nothing kept before: nothing written)."""
    if "\n" in rel or "\0" in rel or "\t" in session:
        return
    data = confined.read_planted(root, NAME, MAX_BYTES) or b""
    head, tail = _mark(session, rel)
    lines = [
        x + b"\n"
        for x in data.split(b"\n")
        if x and not (x.startswith(head) and (x + b"\n").endswith(tail))
    ]
    if not places and len(lines) == data.count(b"\n"):
        return  # nothing to say, nothing to take back
    st = confined.lstat(root, rel)
    if places and st is not None and stat.S_ISREG(st.st_mode):
        said = b" ".join(b"%d-%d:%s>%d" % (a, b, h.encode(), n) for (a, b, h), n in places.items())
        lines.append(head + _stamp(st) + b"\t" + said + tail)
    while lines and sum(map(len, lines)) > MAX_BYTES:
        lines.pop(0)
    try:  # noqa: SIM105 (contextlib costs the hooks an import)
        confined.replace(root, NAME, b"".join(lines), durable=False)
    except OSError:
        pass  # (a link planted there, a read-only disk: Reads compare with recorded lines)
