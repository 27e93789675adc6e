"""Changes to the journal, the ledger, ``.journal/refs.jsonl``, ``.journal/review.json`` and
``.journal/inbox.jsonl`` made by another hand, found at the next read.

``learning_journal.md`` and ``learning_ledger.md`` are written by our code only (the sandbox
binds them and ``.journal/`` read-only for every Bash command, in every mode), and our writers
check what they write: no secret, entries validated. Anything else that changes them — your
editor, ``git checkout``, a command run without a sandbox, a file a cloned repository committed
— is fine, but unchecked. So each writer of ours records the SHA-256 of what it wrote
(:func:`remember`, under the lock its writers hold), and the next read compares (:func:`check`,
under the same lock): a file that holds something else is reported in one sentence, after a
scan for secrets, and then taken as the new known state (reported once). Nothing is changed.

Each file's record sits beside the others of its lock (two locks never share a record file):
the journal, ledger and anchors in ``written.json`` (``journal.lock``), the review state in
``written-review.json`` (``locks/review.lock``), the inbox in ``written-inbox.json``. The inbox
is appended by the capture hooks (stdlib only, never waiting for a command), so rather than
hash the whole inbox on every turn each append of ours leaves a stamp (offset, length, SHA-256)
in ``written-inbox.jsonl`` while it holds the inbox's ``flock``
(:func:`journal_agent.capture.store.append`); the check, holding that lock shared, accepts a
file that is what it knew followed by exactly our stamped appends. A review state or inbox we
have no record of is taken as known silently, unless git's index tracks it: then it came with
the repository, and that is said.

The sentence waits in :func:`take_notes` for whoever shows the user something: the CLI prints
it on stderr, a tool appends it to its result (our runtime and the MCP server alike).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import BinaryIO

from journal_agent import confined
from journal_agent.paths import state_dir

RECORD = "written.json"
REVIEW = ".journal/review.json"
INBOX = ".journal/inbox.jsonl"
# A file's lock (under .journal/; None: its own flock, taken shared) and its record file.
_GUARDS: dict[str, tuple[str | None, str]] = {
    REVIEW: ("locks/review.lock", "written-review.json"),
    INBOX: (None, "written-inbox.json"),
}
_CHUNK = 1 << 20
_notes: list[str] = []
_notes_lock = threading.Lock()


def _guard(name: str) -> tuple[str | None, str]:
    return _GUARDS.get(name, ("journal.lock", RECORD))


def remember(root: Path, name: str, data: bytes, st: os.stat_result) -> None:
    """After our code wrote ``data`` to ``name`` (``st``: its stat now), under its writers'
    lock: what the next read expects to find."""
    _save(root, name, hashlib.sha256(data).hexdigest(), st)


def remember_file(root: Path, name: str) -> None:
    """After our code appended to ``name`` (``.journal/refs.jsonl``), under the journal's lock:
    what the next read expects to find, hashed as the file is now."""
    f = confined.open_read(root, Path(root) / name)
    if f is None:
        return
    with f:
        st, sha, _ = _hashed(f)
    _save(root, name, sha, st)


def _hashed(f: BinaryIO, at: int = -1) -> tuple[os.stat_result, str, str]:
    """The file's stat, its SHA-256, and the SHA-256 of its first ``at`` bytes ("" when it is
    shorter, or ``at`` < 0)."""
    st = os.fstat(f.fileno())
    digest = hashlib.sha256()
    done, prefix = 0, ""
    while chunk := f.read(_CHUNK):
        if done <= at < done + len(chunk):
            head = digest.copy()
            head.update(chunk[: at - done])
            prefix = head.hexdigest()
        digest.update(chunk)
        done += len(chunk)
    if at == done:
        prefix = digest.hexdigest()
    return st, digest.hexdigest(), prefix


def check(root: Path, name: str, *, held: bool = False) -> None:
    """Before reading ``name``: if it changed since our code last wrote it, queue one sentence
    (with what the secret scan found) and take it as known. Taken under the lock its writers
    hold (``held``: the caller holds it already), so it never reads one of our writes half
    done. Quiet where nothing can be said or recorded (a read-only view inside the sandbox,
    another writer holding the lock: the next read looks again)."""
    path = Path(root) / name
    st = confined.lstat(root, path)  # (a link is not followed: the read after refuses it)
    if st is None:
        return
    known = _load(root, _guard(name)[1]).get(name)
    if isinstance(known, dict) and _same_stat(known, st):
        return
    try:
        with _try_lock(root, name, held):
            _check_locked(root, name, path, known)
    except OSError:  # (BlockingIOError, or confined.Refused: the read after says that one)
        return


def take_notes() -> list[str]:
    """The sentences queued so far (each said once)."""
    with _notes_lock:
        out = list(_notes)
        _notes.clear()
    return out


def _check_locked(root: Path, name: str, path: Path, known: object) -> None:
    f = confined.open_read(root, path)  # never a link, a FIFO or a second name
    if f is None:
        return
    known = known if isinstance(known, dict) else None
    appended = name == INBOX
    with f:
        at = int(known.get("size", -1)) if known and appended else -1
        st, sha, prefix = _hashed(f, at)
        log_at = _appends_end(root) if appended else 0
        if known and known.get("sha256") == sha:
            _save(root, name, sha, st, log_at)  # the same bytes (a touch, a checkout)
            return
        if appended and _only_ours_appended(root, f, known, prefix, st.st_size):
            _save(root, name, sha, st, log_at)
            return
    _save(root, name, sha, st, log_at)
    if known is None:
        if name in _GUARDS and _committed(root, name):  # a clone brought it
            _say(_sentence(root, path, name, "came with the repository (git tracks it)"))
        return  # else nothing of ours to compare with yet: the known state from now on
    _say(_sentence(root, path, name, "was changed outside journal-agent since it last wrote it"))


def _only_ours_appended(
    root: Path, f: BinaryIO, known: dict | None, prefix: str, size: int
) -> bool:
    """Whether the inbox is what we knew (``prefix``: the hash of its first known bytes)
    followed by exactly the appends our stamps name, each with its hash."""
    start = int(known["size"]) if known else 0
    if known and prefix != known.get("sha256"):
        return False
    stamps = {}
    for stamp in _stamps(root, int(known.get("log_at", 0)) if known else 0):
        if stamp["at"] >= start:
            stamps[stamp["at"]] = stamp
    at = start
    while at < size:
        stamp = stamps.get(at)
        if stamp is None:
            return False
        data = os.pread(f.fileno(), stamp["n"], at)
        if len(data) != stamp["n"] or hashlib.sha256(data).hexdigest() != stamp["sha256"]:
            return False
        at += stamp["n"]
    return at == size


def _stamps(root: Path, offset: int) -> list[dict]:
    """The stamps of our inbox appends from byte ``offset`` of their log."""
    from journal_agent.capture.store import APPENDS

    f = confined.open_read(root, state_dir(root) / APPENDS)
    if f is None:
        return []
    out = []
    with f:
        f.seek(offset)
        for line in f.read().splitlines():
            try:
                item = json.loads(line)
                out.append({"at": int(item["at"]), "n": int(item["n"]), "sha256": item["sha256"]})
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line stamps nothing
    return out


def _appends_end(root: Path) -> int:
    from journal_agent.capture.store import APPENDS

    st = confined.lstat(root, state_dir(root) / APPENDS)
    return st.st_size if st is not None else 0


def _committed(root: Path, name: str) -> bool:
    from journal_agent.capture.touch import tracked_by_git

    return tracked_by_git(str(root), (name.encode(),))


def _say(sentence: str) -> None:
    with _notes_lock:
        _notes.append(sentence)


def _sentence(root: Path, path: Path, name: str, what: str) -> str:
    found = _secrets(root, path)
    head = f"note: {name} {what} (an editor, git or a command)"
    if "repository" in what:
        head = f"note: {name} {what}, not from journal-agent here: check it before you use it"
    if found is None:
        return f"{head}; no secret found in it."
    line, kind, more = found
    extra = f" (and {more} more)" if more else ""
    return (
        f"{head}, and line {line} holds what looks like {_a(kind)}{extra}: remove it (or quote it "
        "redacted) before the file is shared or committed; `journal-agent journal check` names "
        "each."
    )


def _a(kind: str) -> str:
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _secrets(root: Path, path: Path) -> tuple[int, str, int] | None:
    """(line of the first secret, its kind, how many more) in ``path``, read a piece at a
    time (at line ends), or None."""
    from journal_agent.secret_text import find_secrets

    first: tuple[int, str] | None = None
    count, line0, rest = 0, 0, b""
    f = confined.open_read(root, path)
    if f is None:
        return None
    with f:
        while True:
            chunk = f.read(_CHUNK)
            data = rest + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            piece, rest = data[:cut], data[cut:]
            if piece:
                for s in find_secrets(piece.decode("utf-8", "replace")):
                    count += 1
                    first = first or (line0 + s.line, s.kind)
                line0 += piece.count(b"\n")
            if not chunk:
                break
    return None if first is None else (first[0], first[1], count - 1)


def _same_stat(known: dict, st: os.stat_result) -> bool:
    return [known.get("size"), known.get("mtime_ns"), known.get("ino")] == [
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    ]


def _load(root: Path, record: str = RECORD) -> dict:
    try:
        data = json.loads(confined.read(root, state_dir(root) / record) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(root: Path, name: str, sha: str, st: os.stat_result, log_at: int = 0) -> None:
    record = _guard(name)[1]
    data = _load(root, record)
    data[name] = {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
    if name == INBOX:
        data[name]["log_at"] = log_at  # the stamps before it are taken into sha256
    text = json.dumps(data, indent=1) + "\n"
    confined.replace(root, state_dir(root) / record, text, durable=False)


class _try_lock:
    """The lock ``name``'s writers hold (``.journal/journal.lock`` as :mod:`journal_agent.locks`
    takes it, the review's lock, or the inbox's own ``flock``, shared), taken without waiting:
    ``BlockingIOError`` when a writer holds it — in this process too. Nothing when ``held``."""

    def __init__(self, root: Path, name: str, held: bool) -> None:
        self.root, self.name, self.held = root, name, held
        self.fd = -1

    def __enter__(self) -> None:
        if self.held:
            return
        lock = _guard(self.name)[0]
        if lock is None:
            f = confined.open_read(self.root, Path(self.root) / self.name)
            if f is None:
                raise FileNotFoundError(self.name)
            self.fd = os.dup(f.fileno())
            f.close()
            mode = fcntl.LOCK_SH
        else:
            self.fd = confined.open_lock(self.root, state_dir(self.root) / lock)
            mode = fcntl.LOCK_EX
        try:
            fcntl.flock(self.fd, mode | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
