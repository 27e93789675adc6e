"""The journal file on disk: reading it safely and appending to it atomically.

Appends are serialized across processes with a lock file under ``.journal/`` and written as
temp file + fsync + rename, so a crash at any point leaves the old journal or the new one.
The new entry is added to the content read *under the lock*, so a concurrent append is never
lost; an editor that saved the file without the lock while we were writing is detected (the
file's size/mtime changed) and the append is redone on the latest content.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.foreign_changes import check as check_foreign
from journal_agent.foreign_changes import remember as remember_ours
from journal_agent.journal._text import open_fence, split_lines
from journal_agent.journal.model import (
    Journal,
    entry_heading,
    fresh_id,
    id_comment,
    parse_journal,
)
from journal_agent.locks import held
from journal_agent.paths import JOURNAL_FILE, state_dir

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO

    from journal_agent.journal.model import Entry
    from journal_agent.journal.stream import FileBytes, JournalFile

logger = logging.getLogger(__name__)

# The user's own header, from their learning-journal agent and /learn command.
HEADER = (
    "# Learning Journal\n"
    "\n"
    "Personal learning notes and insights from studying technical concepts and codebases.\n"
    "\n"
    "This journal uses a structured format with intuitions, analogies, toy examples, code "
    "references, and critical analysis to deeply understand each concept.\n"
    "\n"
    "---\n"
)
LOCK_TIMEOUT = 60.0


@dataclass(frozen=True)
class AppendResult:
    entry_id: str
    line: int  # 1-based line of the new entry's heading
    old_size: int
    old_mtime_ns: int
    new_size: int
    new_mtime_ns: int
    text: str  # the entry as written


class JournalStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / JOURNAL_FILE
        self.state = state_dir(self.root)

    @property
    def lock_path(self) -> Path:
        return self.state / "journal.lock"

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """The journal's lock (journal appends, ledger updates, Write/Edit of either), through
        :func:`journal_agent.locks.held`: one sentence when another process keeps it."""
        return self._locked()

    def exists(self) -> bool:
        """Whether something has the journal's name (a link there is refused when read)."""
        return confined.lstat(self.root, self.path) is not None

    def read_bytes(self) -> bytes:
        check_foreign(self.root, JOURNAL_FILE)
        # Never through a link (finding 5: a journal that is a link to ~/.ssh/id_ed25519 was
        # read and rewritten into the workspace); confined.Refused says what to do instead.
        data = confined.read(self.root, self.path)
        if data is None:
            raise UserError(
                f"there is no {JOURNAL_FILE} in {self.root} yet; append an entry first "
                "(journal-agent journal append --file ENTRY.md)."
            )
        return data

    def stat(self) -> os.stat_result | None:
        """The journal's stat (a link there is not followed), None when there is none."""
        return confined.lstat(self.root, self.path)

    def snapshot(self) -> tuple[os.stat_result, bytes] | None:
        """``(stat, bytes)`` read from one descriptor, None when there is no journal;
        ``confined.Refused`` when the name is a link, FIFO, folder or hard link."""
        return confined.snapshot(self.root, self.path)

    def read_text(self) -> str:
        return decode_journal(self.read_bytes(), self.path)

    def check_encoding(self) -> None:
        """One sentence (with line numbers) when the journal is not UTF-8, the file decoded a
        megabyte at a time: its text whole is up to 4 bytes a character (500 MB for a 100 MB
        journal holding one emoji), and its outline (:meth:`stream`) takes seconds."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")()
        with self._open_file() as f:
            try:
                while block := f.read(1 << 20):
                    decoder.decode(block)
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                decode_journal(self.read_bytes(), self.path)  # the sentence, with line numbers
                raise

    def load(self) -> Journal:
        """The whole journal parsed at once: for small texts and writers; a reader of a journal
        of any size goes through :meth:`stream` (memory bounded by one entry)."""
        return parse_journal(self.read_text())

    def _open_file(self) -> BinaryIO:
        """The journal opened for reading, never through a link (``confined.Refused``), after
        the check for a change by another hand; one sentence when there is none."""
        check_foreign(self.root, JOURNAL_FILE)
        f = confined.open_read(self.root, self.path)
        if f is None:
            raise UserError(
                f"there is no {JOURNAL_FILE} in {self.root} yet; append an entry first "
                "(journal-agent journal append --file ENTRY.md)."
            )
        return f

    @contextlib.contextmanager
    def open_bytes(self) -> Iterator[FileBytes]:
        """The journal's bytes, read where they are needed (:class:`stream.FileBytes`, with the
        file's ``stat``), from one open file."""
        from journal_agent.journal.stream import FileBytes

        with self._open_file() as f:
            yield FileBytes(f)

    def entries_with_bytes(self, data: bytes | FileBytes) -> Iterator[tuple[Entry, int, bytes]]:
        """``(entry, byte offset, its bytes)`` for every entry of ``data`` (the journal as
        bytes, or :meth:`open_bytes`), an entry at a time; one sentence when it is not UTF-8."""
        from journal_agent.journal.stream import FileBytes, JournalFile

        if not isinstance(data, FileBytes):
            text = decode_journal(data, self.path) if data else ""
            journal = parse_journal(text)
            offset = len(journal.preamble.encode("utf-8", "surrogatepass"))
            for entry in journal.entries:
                raw = entry.raw.encode("utf-8", "surrogatepass")
                yield entry, offset, raw
                offset += len(raw)
            return
        journal_file = JournalFile(self.path, file=data.file)
        try:
            spans = journal_file.outline.spans
        except UnicodeDecodeError:
            decode_journal(data[:], self.path)  # the sentence, with line numbers
            raise
        for span in spans:
            raw = journal_file.bytes_of(span)
            yield journal_file.entry(span), span.start, raw

    def stream(self, errors: str = "strict") -> JournalFile:
        """The journal read an entry at a time (:mod:`journal_agent.journal.stream`), its
        outline read now: one sentence for a file that is missing, a link, or not UTF-8
        (``errors="replace"`` reads that too)."""
        from journal_agent.journal.stream import JournalFile

        journal = JournalFile(self.path, file=self._open_file(), errors=errors, owned=True)
        try:
            journal.outline  # noqa: B018 (reads the file: a bad one is refused here)
        except UnicodeDecodeError:
            journal.close()
            decode_journal(self.read_bytes(), self.path)  # the sentence, with line numbers
            raise
        except BaseException:
            journal.close()
            raise
        return journal

    def append(
        self, draft: str, before_write: Callable[[str], Callable[[], None] | None] | None = None
    ) -> AppendResult:
        """Append one entry (markdown starting with its dated heading); returns where it went.

        ``before_write(entry_id)`` runs under the lock just before the journal is replaced and
        may return what undoes it, called (still under the lock) if the replace fails: a full
        disk leaves no reference anchor for an entry that is not there."""
        check_foreign(self.root, JOURNAL_FILE)  # a change by another hand: said before ours
        with self._locked():
            confined.remove_stale_temps(self.root, self.path)
            for _ in range(5):
                found = confined.snapshot(self.root, self.path)
                st, data = found if found else (None, HEADER.encode("utf-8"))
                # Bytes from here on: a 14 MB journal with emoji is 56 MB as a str.
                lines = self._known_lines(st)
                fence = None  # a journal we wrote last never ends inside a code block
                if lines is None:
                    decode_journal(data, self.path)  # refuse to extend a file that is not UTF-8
                    lines = data.count(b"\n")
                    fence = _open_fence(data)
                newline = _newline(data)
                entry_id, entry_text = prepare_entry(draft, data, newline)
                sep = _separator(data, newline.encode(), fence)
                entry_bytes = entry_text.encode("utf-8")
                new_data = b"".join((data, sep, entry_bytes))
                line = lines + sep.count(b"\n") + 1
                # Someone saved the file without the lock since we read it: redo on their content.
                if st is not None and changed_since(self.root, self.path, st):
                    continue
                # e.g. record reference hashes, still under the lock
                undo = before_write(entry_id) if before_write is not None else None
                try:
                    new_st = confined.replace(self.root, self.path, new_data)
                except BaseException:
                    if undo is not None:
                        undo()
                    raise
                remember_ours(self.root, JOURNAL_FILE, new_data, new_st)
                self._remember(new_st, line - 1 + entry_bytes.count(b"\n"))
                return AppendResult(
                    entry_id=entry_id,
                    line=line,
                    old_size=st.st_size if st else -1,
                    old_mtime_ns=st.st_mtime_ns if st else -1,
                    new_size=new_st.st_size,
                    new_mtime_ns=new_st.st_mtime_ns,
                    text=entry_text,
                )
            raise UserError(
                f"{self.path} kept changing while appending; close the editor that is saving it "
                "and try again."
            )

    # A journal we wrote ourselves is known to be UTF-8 with a known line count: remembering
    # its stat saves decoding 14 MB on the next append (a hand edit changes the stat).
    @property
    def _state_path(self) -> Path:
        return self.state / "journal.state.json"

    def _known_lines(self, st: os.stat_result | None) -> int | None:
        if st is None:
            return None
        try:
            known = json.loads(confined.read(self.root, self._state_path) or b"null")
            if [known["size"], known["mtime_ns"], known["ino"]] == [
                st.st_size,
                st.st_mtime_ns,
                st.st_ino,
            ]:
                return int(known["lines"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def _remember(self, st: os.stat_result, lines: int) -> None:
        state = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "lines": lines}
        try:
            # A cache: no fsync; a stale one never matches.
            confined.replace(self.root, self._state_path, json.dumps(state), durable=False)
        except OSError as exc:
            logger.debug(
                "could not cache the journal's line count in %s: %s", self._state_path, exc
            )

    def replace_all(self, data: bytes) -> None:
        """Write the whole journal (used by repair), under the lock."""
        with self._locked():
            confined.remove_stale_temps(self.root, self.path)
            remember_ours(
                self.root, JOURNAL_FILE, data, confined.replace(self.root, self.path, data)
            )

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return held(
            self.lock_path,
            LOCK_TIMEOUT,
            f"another journal-agent process has held {self.lock_path} for over "
            f"{LOCK_TIMEOUT:.0f} s; wait for it to finish and try again.",
            anchor=self.root,
        )


def changed_since(root: Path, path: Path, before: os.stat_result) -> bool:
    """Whether ``path`` was replaced or rewritten since ``before`` was taken (an editor saved,
    or something put a link there)."""
    now = confined.lstat(root, path)
    if now is None:
        return True
    return (now.st_size, now.st_mtime_ns, now.st_ino) != (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


def decode_journal(data: bytes, path: Path) -> str:
    """The journal's text; one clear sentence (with line numbers) when it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        from journal_agent.journal.encoding import scan

        lines = [i.line for i in scan(data) if i.kind == "invalid_utf8"]
        shown = ", ".join(str(n) for n in lines[:10]) + (" …" if len(lines) > 10 else "")
        raise UserError(
            f"{path.name} is not valid UTF-8 (line {shown}); run `journal-agent journal "
            "repair` to fix it (it writes a backup first)."
        ) from None


def _newline(data: bytes) -> str:
    """The journal's line ending, judged from its end (where the new entry goes)."""
    tail = data[-65536:]
    crlf = tail.count(b"\r\n")
    return "\r\n" if crlf and crlf * 2 >= tail.count(b"\n") else "\n"


def _open_fence(data: bytes) -> bytes | None:
    """The fence (```` ``` ```` or ``~~~``) a journal ends inside of, if any."""
    current = None
    for match in _FENCE_LINE.finditer(data):
        marker, info = match.group(1), match.group(2).strip()
        if current is None:
            current = marker
        elif marker[:1] == current[:1] and len(marker) >= len(current) and not info:
            current = None
    return current


_FENCE_LINE = re.compile(rb"(?m)^ {0,3}(`{3,}|~{3,})([^\n]*)$")


def _separator(data: bytes, nl: bytes, fence: bytes | None = None) -> bytes:
    """What goes between the journal and the new entry: end the last line, close a code block
    left open (or the entry would be swallowed by it), then a blank line."""
    if not data:
        return b""
    sep = b"" if data.endswith(b"\n") else nl
    if fence is not None:
        sep += fence + nl
    end = data[-8:] + sep
    if not end.endswith(b"\n\n") and not end.endswith(b"\r\n\r\n"):
        sep += nl
    return sep


def prepare_entry(draft: str, journal: bytes, newline: str = "\n") -> tuple[str, str]:
    """``(id, text)``: the draft with an ``<!-- entry: id -->`` line under its heading, a
    fresh id, surrounding blank lines trimmed, and a ``---`` rule after it as in the header."""
    lines = [line.rstrip("\r\n") for line in split_lines(draft.replace("\r\n", "\n"))]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    heading = entry_heading(lines[0]) if lines else None
    if heading is None:
        raise ValueError("the entry must start with its heading, e.g. '## Title (YYYY-MM-DD)'")
    from journal_agent.journal.model import _explicit_id

    title, date = heading
    explicit = _explicit_id([line + "\n" for line in lines])
    if explicit is not None:
        body_start = next(i for i in range(1, len(lines)) if lines[i].strip())
        del lines[body_start]
    from journal_agent.journal._text import slugify

    entry_id = fresh_id(journal, explicit or f"{slugify(title)}-{date}", date)
    lines.insert(1, id_comment(entry_id))
    unclosed = open_fence([line + "\n" for line in lines])
    if unclosed:
        # An unclosed code block would swallow the rule and every later entry: close it.
        lines.append(unclosed)
    if lines[-1].strip() not in ("---", "***", "___"):
        lines += ["", "---"]
    return entry_id, newline.join(lines) + newline
