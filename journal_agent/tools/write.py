"""Write: create a file or replace one this run has Read, atomically and never over a newer one.

The machinery here is shared with Edit:

- :func:`writer_lock` serializes writers of one file across threads and processes (a
  ``filelock`` under ``.journal/locks/``, so the user's tree gets no ``*.lock`` litter);
- :func:`ensure_unchanged` is the optimistic-concurrency check, done under that lock: the
  file on disk must still be the one this run read, else "modified since read";
- :func:`atomic_write` replaces the file through :func:`journal_agent.confined.replace_at`
  (random temp file, fsync, rename, mode kept), so readers see the old or the new file, never
  half.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from journal_agent import confined
from journal_agent.paths import JOURNAL_FILE, LEDGER_FILE, state_dir
from journal_agent.tools._file_versions import keep_previous
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import (
    open_beneath,
    open_dir_beneath,
    permitted_path,
    workspace_root,
)
from journal_agent.tools.read_tracking import Fingerprint, ReadTracker, tracker_for
from journal_agent.tools.redacted_view import restore_in_content

LOCK_TIMEOUT_S = 60.0


class WriteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(
        description="The absolute path to the file to write (a relative path is taken from "
        "the workspace root)."
    )
    content: str = Field(description="The content to write to the file.")


class Write(Tool[WriteInput]):
    name: ClassVar[str] = "Write"
    description: ClassVar[str] = (
        "Writes a file to the local filesystem (inside the workspace).\n\n"
        "Usage:\n"
        "- Overwrites the file if it exists. An existing file must have been Read in this "
        "conversation first, or the call fails.\n"
        "- If the file changed on disk since you read it (another agent or the user edited it), "
        "the call fails with 'modified since read': Read it again and redo your change.\n"
        "- Creates missing parent directories. The write is atomic and keeps the file's mode.\n"
        "- Prefer Edit for changing part of an existing file; use Write for new files or full "
        "rewrites."
    )
    Input = WriteInput

    def run(self, ctx: ToolContext, params: WriteInput) -> ToolResult:
        path = permitted_path(ctx, self.name, params.file_path)
        tracker = tracker_for(ctx)
        encode_text(params.content, path)  # (refused before taking the lock)
        check_foreign(ctx.root, path)

        with writer_lock(ctx.root, path):
            previous = ensure_unchanged(ctx.root, tracker, path, action="writing to")
            content = params.content
            if previous is not None:
                # The model saw the file with its secrets redacted: they go back in place.
                content = restore_in_content(previous.decode("utf-8", "surrogateescape"), content)
            data = encode_text(content, path)
            refuse_secrets_in_user_docs(ctx.root, path, content, previous)
            existed = previous is not None
            keep_previous(ctx.root, path, previous)
            if not existed:
                make_parents(ctx.root, path)
            written = atomic_write(ctx.root, path, data)
            remember_written(tracker, path, data, written)
        if existed:
            return ToolResult(f"The file {path} has been updated ({_size(data)}).")
        return ToolResult(f"File created successfully at: {path} ({_size(data)}).")


def refuse_secrets_in_user_docs(root: Path, path: Path, new: str, old: bytes | str | None) -> None:
    """The journal and the ledger never receive a secret: refuse text that adds one (lines
    already there, put by the user, do not block an unrelated change)."""
    if path.name not in (JOURNAL_FILE, LEDGER_FILE) or path.parent != Path(workspace_root(root)):
        return
    from journal_agent.secret_text import SecretInText, refuse_secrets

    if isinstance(old, bytes):
        old = old.decode("utf-8", "replace")
    before = set((old or "").splitlines())
    added = "\n".join(line for line in new.splitlines() if line not in before)
    try:
        refuse_secrets(added, path.name)
    except SecretInText as exc:
        raise ToolError(exc.message) from None


def encode_text(text: str, path: Path) -> bytes:
    # surrogateescape round-trips bytes that were not UTF-8 when Edit decoded the file.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ToolError(
            f"The content for {path} contains characters that cannot be written as UTF-8 "
            "(lone surrogates); remove them."
        ) from None


@contextlib.contextmanager
def writer_lock(root: Path, path: Path) -> Iterator[None]:
    """Hold the lock that every writer of ``path`` (in any thread or process) takes."""
    from journal_agent.locks import held

    lock_file = lock_file_for(root, path)
    busy = (
        f"Another writer has held the lock on {path} for over {LOCK_TIMEOUT_S:.0f} s; "
        "try again later."
    )
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(held(lock_file, LOCK_TIMEOUT_S, busy, error=ToolError))
        except OSError as exc:
            raise ToolError(
                f"Cannot take the writer lock in {lock_file.parent}: {exc.strerror}."
            ) from None
        yield


def lock_file_for(root: Path, path: Path) -> Path:
    """The lock file guarding writes to ``path``: one per file, under ``.journal/``.

    The journal is also appended to by the journal store (JournalAppend, ``journal append``)
    and the ledger updated by LedgerUpdate / ``ledger …``; Write and Edit of either take the
    journal's lock, so an append or a ledger update and an edit never interleave.
    """
    if path.name in (JOURNAL_FILE, LEDGER_FILE) and path.parent == Path(workspace_root(root)):
        from journal_agent.journal.store import JournalStore

        return JournalStore(root).lock_path
    key = hashlib.sha256(os.fsencode(path)).hexdigest()[:32]
    return state_dir(root) / "locks" / f"{key}.lock"


def current_fingerprint(root: Path, path: Path) -> tuple[Fingerprint, bytes] | None:
    """The file as it is now (fingerprint and bytes), or None if it does not exist."""
    try:
        fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory, not a file; give a file path.") from None
    except OSError as exc:
        raise _os_error("open", path, exc) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path} is a directory, not a file; give a file path.")
        raise ToolError(f"{path} is not a regular file; Write and Edit change files only.")
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise _os_error("read", path, exc) from None
    return Fingerprint.of_bytes(data, st), data


def ensure_unchanged(root: Path, tracker: ReadTracker, path: Path, *, action: str) -> bytes | None:
    """Check, under the writer lock, that ``path`` is as this run read it; return its bytes.

    None means the file does not exist (then no prior Read is needed). A file that exists
    must have been read by this run and must not have changed since.
    """
    seen = tracker.get(path)
    now = current_fingerprint(root, path)
    if now is None:
        if seen is not None:
            tracker.forget(path)  # reported once: repeating the call creates the file anew
            raise ToolError(
                f"{path} was deleted since you read it (by another agent or the user); if it "
                "should exist again, repeat the call to create it anew."
            )
        return None
    fingerprint, data = now
    if seen is None:
        raise ToolError(f"{path} has not been read yet. Read it first before {action} it.")
    if not seen.matches(fingerprint):
        raise ToolError(
            f"{path} was modified since read — Read it again, then redo your change "
            "(another agent or the user changed it; nothing was overwritten)."
        )
    return data


def remember_written(tracker: ReadTracker, path: Path, data: bytes, st: os.stat_result) -> None:
    """After our own write, this run's view of the file is what it wrote."""
    tracker.record(path, Fingerprint.of_bytes(data, st))


def atomic_write(root: Path, path: Path, data: bytes) -> os.stat_result:
    """Write ``path`` atomically (:func:`journal_agent.confined.replace_at`), inside the workspace.

    The directory is reached without following symlinks (:func:`open_dir_beneath`) and the
    write goes through its descriptor. Returns the stat of the file as written.
    """
    try:
        dir_fd = open_dir_beneath(root, path.parent)
    except OSError as exc:
        raise _os_error("write in", path.parent, exc) from None
    try:
        written = confined.replace_at(dir_fd, path.name, data)
    except confined.NoSpace as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise _os_error("write", path, exc) from None
    finally:
        os.close(dir_fd)
    if (name := journal_or_ledger(root, path)) is not None:
        from journal_agent.foreign_changes import remember

        remember(Path(workspace_root(root)), name, data, written)  # under the journal's lock
    return written


def journal_or_ledger(root: Path, path: Path) -> str | None:
    """``learning_journal.md`` or ``learning_ledger.md`` when ``path`` is that file of the
    workspace, else None."""
    if path.name in (JOURNAL_FILE, LEDGER_FILE) and path.parent == Path(workspace_root(root)):
        return path.name
    return None


def check_foreign(root: Path, path: Path) -> None:
    """Before Write or Edit of the journal or the ledger: a change another hand made is said
    first (:mod:`journal_agent.foreign_changes`), not taken silently into ours."""
    if (name := journal_or_ledger(root, path)) is not None:
        from journal_agent.foreign_changes import check

        check(Path(workspace_root(root)), name)


def make_parents(root: Path, path: Path) -> None:
    """Create the missing directories above ``path``, inside the workspace, following no link."""
    try:
        os.close(open_dir_beneath(root, path.parent, create=True))
    except NotADirectoryError:
        raise ToolError(
            f"Cannot create {path}: a parent path exists and is not a directory."
        ) from None
    except OSError as exc:
        raise _os_error("create the directory", path.parent, exc) from None


def _os_error(action: str, path: Path, exc: OSError) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        # The path was resolved symlink-free a moment ago; the no-follow walk now hit a link
        # (or a file) where a directory was.
        return ToolError(
            f"Cannot {action} {path}: the path changed while the tool ran (a symlink or a file "
            "now stands where a directory or the file was); Read the file again if it should "
            "still be changed."
        )
    return ToolError(f"Cannot {action} {path}: {exc.strerror or exc}.")


def _size(data: bytes) -> str:
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return f"{lines:,} line{'' if lines == 1 else 's'}, {len(data):,} bytes"
