"""The feedback loop you can undo: the user's feedback, the change it led to, and a way back.

/learn improves its own file from the user's feedback (the user's "Meta-Learning" loop). The
agent edits the project's copy (``.claude/commands/learn.md``, or any ejected command or agent
file); Write and Edit keep each replaced version under ``.journal/history/<file>/``
(:mod:`journal_agent.tools._history`). This module ties those versions to the feedback:

* ``record`` — one numbered record: when, which file, the feedback, and the file's version
  before the change (the earliest version kept since the previous record) and after it (the
  file now). Versions are stored by content hash under ``.journal/history/versions/``.
* ``history`` / ``diff`` — each record, and its unified diff.
* ``revert`` — put the file back as it was before change N; the revert is itself a record (so it
  can be reverted too) and the replaced text is kept like any other version.

Records are lines of ``.journal/history/feedback.jsonl``, appended under a lock and fsynced.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from journal_agent.errors import UserError
from journal_agent.locks import held
from journal_agent.paths import state_dir
from journal_agent.tools._history import history_dir

_KINDS = (("commands", ".claude/commands"), ("agents", ".claude/agents"))
_STAMP = "%Y%m%dT%H%M%S.%fZ"


@dataclass
class FeedbackRecord:
    n: int
    time: str  # ISO UTC
    kind: str  # feedback | revert
    file: str  # relative to the workspace root
    feedback: str
    before: str  # content hash of the version before
    after: str  # content hash of the version after
    added: int
    removed: int
    reverts: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_file(root: Path, name: str) -> Path:
    """An ejected command or agent file by name (``learn``, ``agents/learning-journal``) or
    path (``.claude/commands/learn.md``)."""
    root = Path(root)
    candidates: list[Path] = []
    as_path = (root / name).resolve() if name.endswith(".md") else None
    if as_path is not None and as_path.is_file():
        candidates = [as_path]
    else:
        stem = name.removesuffix(".md")
        kind, _, bare_name = stem.rpartition("/")
        for label, folder in _KINDS:
            if kind and kind not in (label, folder):
                continue
            path = root / folder / f"{bare_name}.md"
            if path.is_file():
                candidates.append(path.resolve())
    if not candidates:
        raise UserError(
            f"no ejected command or agent file matches {name!r} under .claude/commands or "
            f".claude/agents; eject it first (`journal-agent commands --eject {name}`)."
        )
    if len(candidates) > 1:
        raise UserError(
            f"both a command and an agent are named {name!r}; say commands/{name} or agents/{name}."
        )
    path = candidates[0]
    rel = path.relative_to(root.resolve())
    if rel.parts[:2] not in ((".claude", "commands"), (".claude", "agents")):
        raise UserError(
            f"{rel} is not an ejected command or agent file; the feedback loop tracks files "
            "under .claude/commands and .claude/agents."
        )
    return path


class FeedbackLog:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.dir = history_dir(self.root)
        self.path = self.dir / "feedback.jsonl"
        self.versions = self.dir / "versions"

    def locked(self) -> contextlib.AbstractContextManager[None]:
        return held(
            state_dir(self.root) / "locks" / "feedback.lock",
            60,
            "another process has held the feedback lock for 60 s; try again.",
        )

    # -- storage ----------------------------------------------------------------------------
    def records(self) -> list[FeedbackRecord]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append(FeedbackRecord(**json.loads(line)))
            except (ValueError, TypeError):
                raise UserError(
                    f"{self.path} line {number} is not a feedback record; fix or remove that "
                    "line (the versions it names are still under .journal/history/versions)."
                ) from None
        return out

    def _append(self, record: FeedbackRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def store(self, data: bytes) -> str:
        from journal_agent.atomic import atomic_write

        digest = hashlib.sha256(data).hexdigest()[:16]
        path = self.versions / f"{digest}.md"
        if not path.exists():
            atomic_write(path, data)
        return digest

    def version(self, digest: str) -> bytes:
        try:
            return (self.versions / f"{digest}.md").read_bytes()
        except FileNotFoundError:
            raise UserError(
                f"version {digest} is missing from {self.versions}; that record cannot be "
                "shown or reverted."
            ) from None

    def get(self, n: int) -> FeedbackRecord:
        for record in self.records():
            if record.n == n:
                return record
        raise UserError(f"there is no feedback record #{n}; `journal-agent feedback --history`.")

    # -- operations ---------------------------------------------------------------------------
    def record(self, feedback: str, name: str = "learn") -> FeedbackRecord:
        feedback = " ".join(feedback.split())
        if not feedback:
            raise UserError(
                "the feedback is empty; say what worked, what was missing, or what to change."
            )
        path = resolve_file(self.root, name)
        rel = str(path.relative_to(self.root))
        with self.locked():
            records = self.records()
            mine = [r for r in records if r.file == rel]
            now = datetime.now(UTC)
            after = path.read_bytes()
            before = self._before(path, mine, after)
            record = self._new(records, now, "feedback", rel, feedback, before, after)
            self._append(record)
        return record

    def _before(self, path: Path, mine: list[FeedbackRecord], current: bytes) -> bytes:
        """The version before this change: the earliest one Write/Edit kept since the previous
        record of this file; else the previous record's result; else the file as it is."""
        since = datetime.fromisoformat(mine[-1].time) if mine else None
        kept = sorted((self.dir / path.relative_to(self.root)).glob("*.md"))
        for snapshot in kept:
            try:
                taken = datetime.strptime(snapshot.stem, _STAMP).replace(tzinfo=UTC)
            except ValueError:
                continue
            if since is None or taken > since:
                return snapshot.read_bytes()
        if mine:
            return self.version(mine[-1].after)
        return current

    def _new(
        self,
        records: list[FeedbackRecord],
        now: datetime,
        kind: str,
        rel: str,
        feedback: str,
        before: bytes,
        after: bytes,
        reverts: int | None = None,
    ) -> FeedbackRecord:
        added, removed = _counts(before, after)
        return FeedbackRecord(
            n=max((r.n for r in records), default=0) + 1,
            time=now.isoformat(timespec="microseconds"),
            kind=kind,
            file=rel,
            feedback=feedback,
            before=self.store(before),
            after=self.store(after),
            added=added,
            removed=removed,
            reverts=reverts,
        )

    def diff(self, n: int) -> str:
        record = self.get(n)
        return unified(self.version(record.before), self.version(record.after), record)

    def revert(self, n: int) -> FeedbackRecord:
        """Put the file back as it was before change ``n`` (kept in history as a record)."""
        from journal_agent.atomic import atomic_write
        from journal_agent.tools._history import keep_previous
        from journal_agent.tools.base import ToolError
        from journal_agent.tools.write import writer_lock

        target = self.get(n)
        path = self.root / target.file
        wanted = self.version(target.before)
        with self.locked():
            try:
                with writer_lock(self.root, path):
                    try:
                        current = path.read_bytes()
                    except FileNotFoundError:
                        current = b""
                    if current == wanted:
                        raise UserError(
                            f"{target.file} is already as it was before change #{n}; nothing "
                            "to revert."
                        )
                    keep_previous(self.root, path, current or None)
                    atomic_write(path, wanted)
            except ToolError as exc:
                raise UserError(str(exc)) from None
            records = self.records()
            record = self._new(
                records,
                datetime.now(UTC),
                "revert",
                target.file,
                f"revert #{n}: {target.feedback}",
                current,
                wanted,
                reverts=n,
            )
            self._append(record)
        return record


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def _counts(before: bytes, after: bytes) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(_lines(before), _lines(after), n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def unified(before: bytes, after: bytes, record: FeedbackRecord) -> str:
    return "".join(
        difflib.unified_diff(
            _lines(before),
            _lines(after),
            fromfile=f"a/{record.file} (before #{record.n})",
            tofile=f"b/{record.file} (after #{record.n})",
        )
    )
