"""Changes to the journal, the ledger and ``.journal/refs.jsonl`` made by another hand, found at
the next read.

``learning_journal.md`` and ``learning_ledger.md`` are written by our code only (the sandbox
binds them read-only for every Bash command, in every mode), and our writers check what they
write: no secret, entries validated. Anything else that changes them — your editor, ``git
checkout``, a command run without a sandbox — is fine, but unchecked. So each writer of ours
records the SHA-256 of what it wrote (:func:`remember`, under the journal's lock), and the next
read compares (:func:`check`): a file that holds something else is reported in one sentence,
after a scan for secrets, and then taken as the new known state (reported once).

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
_CHUNK = 1 << 20
_notes: list[str] = []
_notes_lock = threading.Lock()


def remember(root: Path, name: str, data: bytes, st: os.stat_result) -> None:
    """After our code wrote ``data`` to ``name`` (``st``: its stat now), under the journal's
    lock: what the next read expects to find."""
    _save(root, name, hashlib.sha256(data).hexdigest(), st)


def remember_file(root: Path, name: str) -> None:
    """After our code appended to ``name`` (``.journal/refs.jsonl``), under the journal's lock:
    what the next read expects to find, hashed as the file is now."""
    f = confined.open_read(root, Path(root) / name)
    if f is None:
        return
    with f:
        st, sha = _hashed(f)
    _save(root, name, sha, st)


def _hashed(f: BinaryIO) -> tuple[os.stat_result, str]:
    st = os.fstat(f.fileno())
    digest = hashlib.sha256()
    while chunk := f.read(_CHUNK):
        digest.update(chunk)
    return st, digest.hexdigest()


def check(root: Path, name: str) -> None:
    """Before reading ``name``: if it changed since our code last wrote it, queue one sentence
    (with what the secret scan found) and take it as known. Quiet where nothing can be said or
    recorded (a read-only view inside the sandbox, another writer holding the lock: the next
    read looks again)."""
    path = Path(root) / name
    st = confined.lstat(root, path)  # (a link is not followed: the read after refuses it)
    if st is None:
        return
    known = _load(root).get(name)
    if isinstance(known, dict) and _same_stat(known, st):
        return
    try:
        with _try_lock(root):
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
    with f:
        st, sha = _hashed(f)
    if isinstance(known, dict) and known.get("sha256") == sha:
        _save(root, name, sha, st)  # the same bytes (a touch, a checkout of the same text)
        return
    _save(root, name, sha, st)
    if not isinstance(known, dict):
        return  # nothing of ours to compare with yet: this is the known state from now on
    with _notes_lock:
        _notes.append(_sentence(root, path, name))


def _sentence(root: Path, path: Path, name: str) -> str:
    found = _secrets(root, path)
    head = (
        f"note: {name} was changed outside journal-agent since it last wrote it (an editor, git "
        "or a command)"
    )
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


def _load(root: Path) -> dict:
    try:
        data = json.loads(confined.read(root, state_dir(root) / RECORD) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(root: Path, name: str, sha: str, st: os.stat_result) -> None:
    data = _load(root)
    data[name] = {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
    text = json.dumps(data, indent=1) + "\n"
    confined.replace(root, state_dir(root) / RECORD, text, durable=False)


class _try_lock:
    """The journal's lock (``.journal/journal.lock``, as :mod:`journal_agent.locks` takes it),
    taken without waiting: ``BlockingIOError`` when a writer holds it — in this process too."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = state_dir(root) / "journal.lock"
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = confined.open_lock(self.root, self.path)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
