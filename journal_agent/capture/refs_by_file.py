"""Where ``.journal/refs.jsonl`` cites each file, for PostToolUse (capture/touch.py): which
entries' last lines cite which lines of a file, and where those lines are in ``refs.jsonl``.

Most tool calls touch a file no entry cites, and finding that out by searching ``refs.jsonl``
(13 MB at 10,000 entries) took 3.5 ms of every call; a whole-file Read of a file 2,000
references cite passed over each of them. This index, ``.journal/capture/refs-by-file.idx``,
answers both with a look at two small parts of it (mapped, not read whole): a table of the
cited files, and the file's section: per reference the offset of the entry's last line in
``refs.jsonl``, the lines it cites, the hash it recorded and the entry's id, newest line first
(an Edit of a file 500 references cite places each of them without parsing a line:
capture/edit_refs.py).

``refs.jsonl`` is only ever appended to (journal_agent.journal.refs.RefStore), so the index
stays true of the bytes it covers: its head holds how many (ending at a line's end), the file's
inode and the last bytes covered. Lines appended since are read from ``refs.jsonl`` itself (and
win for their entries, as a later line always does); a file cut back, replaced or edited at the
end covered makes the index stale, and so does a tail over :data:`TAIL_MAX`: the hook then
builds it again (about 90 ms at 10,000 entries, once) and writes it whole through the room.
The detached child SessionStart and SessionEnd start builds it again whenever lines were
appended (:func:`refresh`), so a session's calls seldom read a tail or build it.
Each line the index points at is read from ``refs.jsonl`` before an entry is named and must
cite the lines (and hash) the index says, else the caller searches ``refs.jsonl`` as before and
the index is dropped (built again at the next call): an index edited by hand can make the hook
silent, never make it name an entry refs.jsonl does not.

Stdlib only, no ``re`` or ``json`` (the hooks run under ``python3 -I -S``).
"""

from __future__ import annotations

import os

from journal_agent import confined
from journal_agent.lightjson import loads

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable, Iterator

    Data = mmap.mmap | bytes
    # Offset of the line in refs.jsonl, first and last line cited, the recorded hash (b"-":
    # none the index can hold) and the entry's id (b"": one it cannot hold): the line says.
    Row = tuple[int, int, int, bytes, bytes]

NAME = os.path.join(".journal", "capture", "refs-by-file.idx")
REFS = os.path.join(".journal", "refs.jsonl")
MAGIC = b"journal-agent refs-by-file 2"
CHECK = 48  # bytes at the end of what the index covers, kept in its head
TAIL_MAX = 64 << 10  # bytes of refs.jsonl past the index read as lines (~50) before a rebuild
MAX_BYTES = 64 << 20  # an index bigger than this is not ours


def rows(root: str, data: Data, ino: int, rel: str) -> tuple[list[Row], list[int]] | None:
    """``(rows of rel in the index, offsets of the lines appended since)``, newest first; the
    index built again first when stale. None when it cannot be had (a path the index cannot
    hold, a folder it cannot be written to): the caller searches ``refs.jsonl``."""
    if "\n" in rel or "\0" in rel:
        return None
    index = _mapped(root)
    for built in (False, True):
        covered = _covered(index, data, ino)
        found = _section(index, rel) if index is not None and covered is not None else None
        if found is not None and covered is not None:
            return found, _tail(data, covered)
        if built or not _writable(root):
            break  # (building it at every call would cost more than a search)
        index = _rebuild(root, data, ino)
    return None


def refresh(root: str) -> None:
    """Build the index again when it is stale or lines were appended since it was: the
    detached child SessionStart and SessionEnd start, so that a session's tool calls find it
    whole (no lines to read past it, no build of their own)."""
    import mmap

    try:
        f = confined.open_read(root, REFS, one_name=False)
    except OSError:
        return  # (a link there: the hook says nothing from it either)
    if f is None:
        return
    with f:
        st = os.fstat(f.fileno())
        if st.st_size == 0 or not _writable(root):
            return
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with data:
        covered = _covered(_mapped(root), data, st.st_ino)
        if covered is None or covered < data.rfind(b"\n") + 1:
            _rebuild(root, data, st.st_ino)


def mapped(
    anchor: str, path: str, stat: list[os.stat_result] | None = None, one_name: bool = False
) -> mmap.mmap | bytes | None:
    """``path`` mapped read-only (searched where it lies, never copied: ``refs.jsonl`` of
    10,000 entries is 13 MB), ``b""`` when empty, None when missing or not a plain file (a
    link, a FIFO: refused by the room). ``stat``: gets the opened file's stat."""
    import mmap

    try:
        f = confined.open_read(anchor, path, one_name=one_name)
    except OSError:
        return None
    if f is None:
        return None
    with f:
        st = os.fstat(f.fileno())
        if stat is not None:
            stat.append(st)
        if st.st_size == 0:
            return b""
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None


def _mapped(root: str) -> Data | None:
    """The index, mapped (a call looks at its table and one section); None when it is not
    a plain file of ours of at most :data:`MAX_BYTES`."""
    st: list[os.stat_result] = []
    index = mapped(root, NAME, st, one_name=True)
    return index if index and st[0].st_size <= MAX_BYTES else None


def _writable(root: str) -> bool:
    """Whether the index's folder (or .journal/, before it is made) can be written: a plain
    folder, on a disk that is not read-only. (The write itself goes through the room.)"""
    folder = os.path.join(root, os.path.dirname(NAME))
    if not os.path.lexists(folder):
        folder = os.path.dirname(folder)
    return not os.path.islink(folder) and os.access(folder, os.W_OK)


def _covered(index: Data | None, data: Data, ino: int) -> int | None:
    """How many bytes of ``refs.jsonl`` the index covers, None when it is stale."""
    if index is None or index[: len(MAGIC) + 1] != MAGIC + b" " or index[-3:] != b"\n\0\n":
        return None
    head = index[: index.find(b"\n")].split(b" ")
    try:
        covered, at_ino, check = int(head[-4]), int(head[-3]), bytes.fromhex(head[-2].decode())
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
    if at_ino != ino or covered > len(data) or len(data) - covered > TAIL_MAX:
        return None
    return covered if data[max(0, covered - CHECK) : covered] == check else None


def _section(index: Data, rel: str) -> list[Row] | None:
    """The rows of ``rel``, found in the table at the index's head; None when the table or a
    row is not as written (the index is not ours as it stands)."""
    head = index.find(b"\n")
    try:
        table = int(index[:head].rsplit(b" ", 1)[-1])
    except ValueError:
        return None
    key = b"\n\0" + rel.encode("utf-8", "surrogateescape") + b"\n"
    at = index.find(key, head, table)
    if at == -1:
        return []
    line = index[at + len(key) : index.find(b"\n", at + len(key), table)]
    out: list[Row] = []
    try:
        start, end = (int(x) for x in line.split(b" "))
        if not table <= start <= end <= len(index) - 2:
            return None
        for row in index[start:end].split(b"\n")[:-1]:
            offset, first, last, digest, entry = row.split(b" ", 4)
            out.append((int(offset), int(first), int(last), digest, entry))
    except ValueError:
        return None
    return out


def _tail(data: Data, covered: int) -> list[int]:
    """Offsets of the lines past ``covered``, newest first."""
    out = []
    at = covered
    while at < len(data):
        out.append(at)
        end = data.find(b"\n", at)
        at = len(data) if end == -1 else end + 1
    return out[::-1]


def line_at(data: Data, offset: int) -> dict[str, object] | None:
    """The object of the line of ``refs.jsonl`` that starts at ``offset``, None when none
    does there (torn, or not an entry's anchors)."""
    if offset < 0 or offset >= len(data) or (offset and data[offset - 1 : offset] != b"\n"):
        return None
    end = data.find(b"\n", offset)
    try:
        item = loads(data[offset : len(data) if end == -1 else end].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(item, dict) or not isinstance(item.get("entry"), str):
        return None
    anchors = item.get("anchors") or item.get("refs")
    return item if isinstance(anchors, dict) else None


def cited(
    data: Data, rel: str, keep: Callable[[tuple[int, int]], bool] | None, found: tuple, done: set
) -> Iterator[tuple[str, str, dict[str, object]]]:
    """What capture/touch.py's ``cited`` yields, from the index's rows (``found``: :func:`rows`)
    and the lines appended since; each entry yielded is added to ``done``. Raises
    :class:`Stale` at a row whose line does not say what the index does (the caller searches
    ``refs.jsonl`` for the rest)."""
    indexed, tail = found
    seen: set[str] = set()  # entries whose last line was looked at
    for offset in tail:  # newer than any row: an entry's line here wins
        item = line_at(data, offset)
        if item is not None and item["entry"] not in seen:
            seen.add(item["entry"])  # type: ignore[arg-type]  # (a str: line_at)
            yield from keys(item, rel, done)
    lines: set[int] = set()  # (a line cites the file at several places: one row each)
    for offset, first, last, _, _ in indexed:
        if offset in lines or (keep is not None and not keep((first, last))):
            continue
        lines.add(offset)
        item = line_at(data, offset)
        anchors = (item.get("anchors") or item.get("refs")) if item is not None else None
        key = f"{rel}:{first}" + (f"-{last}" if last != first else "")
        if item is None or key not in anchors:  # type: ignore[operator]  # (a dict: line_at)
            raise Stale(offset)
        if item["entry"] not in seen:
            seen.add(item["entry"])  # type: ignore[arg-type]
            yield from keys(item, rel, done)


def drop(root: str) -> None:
    """Remove the index (one of its rows lied): the next call builds it again."""
    try:  # noqa: SIM105 (contextlib costs the hooks an import)
        confined.unlink(root, NAME)
    except OSError:
        pass


class Stale(Exception):
    """A row of the index points at a line that is not what it says (refs.jsonl edited)."""


def keys(
    item: dict[str, object], rel: str, done: set
) -> Iterator[tuple[str, str, dict[str, object]]]:
    """``(entry, key, anchor)`` of each of the line ``item``'s references to ``rel`` (its
    entry added to ``done``)."""
    entry = str(item["entry"])
    anchors = item.get("anchors") or item.get("refs")
    for key, anchor in anchors.items():  # type: ignore[union-attr]  # (a dict: line_at)
        if isinstance(key, str) and key.startswith(rel + ":"):
            done.add(entry)
            yield entry, key, anchor if isinstance(anchor, dict) else {"hash": anchor}


def _last_lines(data: Data, end: int) -> Iterator[tuple[int, dict[str, object]]]:
    """``(offset, object)`` of each entry's last whole line before ``end``, newest first."""
    seen: set[str] = set()
    at = data.rfind(b"\n", 0, max(0, end - 1)) + 1 if end else 0
    stop = end
    while stop > 0:
        item = line_at(data, at)
        entry = item.get("entry") if item is not None else None
        if isinstance(entry, str) and entry not in seen:
            seen.add(entry)
            yield at, item  # type: ignore[misc]  # (checked by line_at)
        stop = at
        at = data.rfind(b"\n", 0, max(0, at - 1)) + 1 if at else 0


def _rebuild(root: str, data: Data, ino: int) -> bytes | None:
    """Build the index of the whole lines of ``data`` and write it; None when it cannot be.
    Its head line (the bytes covered, the inode, their last bytes, where the table ends), a
    table of ``\\0path`` lines each followed by where its section starts and ends, the
    sections, and an end mark."""
    end = data.rfind(b"\n") + 1
    files: dict[str, list[bytes]] = {}
    for offset, item in _last_lines(data, end):
        anchors = item.get("anchors") or item.get("refs")
        entry = _field(item["entry"])
        for key, anchor in anchors.items():  # type: ignore[union-attr]  # (a dict: line_at)
            path, _, lines = str(key).rpartition(":")
            first, _, last = lines.partition("-")
            if not first.isdigit() or not (last or first).isdigit() or "\n" in path:
                continue
            digest = _field(anchor.get("hash") if isinstance(anchor, dict) else anchor, True)
            files.setdefault(path, []).append(
                b"%d %s %s %s %s\n" % (offset, first.encode(), (last or first).encode(),
                                       digest or b"-", entry)
            )  # fmt: skip
    files = {path: found for path, found in files.items() if "\0" not in path}
    check = bytes(data[max(0, end - CHECK) : end]).hex().encode()
    head = b"%s %d %d %s " % (MAGIC, end, ino, check)
    names = [b"\0" + path.encode("utf-8", "surrogateescape") + b"\n" for path in files]
    # (the table's numbers are written at a fixed width: its size is known before they are)
    table = len(head) + 20 + 1 + sum(len(name) + 2 * 20 + 2 for name in names)
    parts, at = [], table
    for name, found in zip(names, files.values(), strict=True):
        size = sum(map(len, found))
        parts.append(name + b"%020d %020d\n" % (at, at + size))
        at += size
    index = b"".join([head, b"%020d\n" % table, *parts, *(b"".join(f) for f in files.values())])
    index += b"\0\n"
    try:
        confined.replace(root, NAME, index, durable=False)
    except OSError:
        return None
    return index


def _field(value: object, hashed: bool = False) -> bytes:
    """An entry's id or a hash as a row holds it; b"" when the row cannot hold it (the line
    is read instead)."""
    if not isinstance(value, str) or (hashed and not value.isalnum()):
        return b""
    try:
        out = value.encode("utf-8")
    except UnicodeEncodeError:
        return b""
    return b"" if b"\n" in out or b"\0" in out else out
