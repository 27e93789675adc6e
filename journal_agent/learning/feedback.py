"""The feedback loop you can undo: the user's feedback, the change it led to, and a way back.

/learn improves its own file from the user's feedback (the user's "Meta-Learning" loop). The
agent edits the project's copy (``.claude/commands/learn.md``, or any ejected command or agent
file); Write and Edit keep each replaced version under ``.journal/history/<file>/``
(:mod:`journal_agent.tools._file_versions`). This module ties those versions to the feedback:

* ``record`` — one numbered record: when, which file, the feedback, and the file's version
  before the change (the earliest version kept since the previous record) and after it (the
  file now). Versions are stored by content hash under ``.journal/history/versions/``.
* ``history`` / ``diff`` — each record, and its unified diff.
* ``revert`` — put the file back as it was before change N; the revert is itself a record (so it
  can be reverted too) and the replaced text is kept like any other version.

Records are lines of ``.journal/history/feedback.jsonl``, appended under a lock and fsynced.
Every line is validated when read (:class:`FeedbackRecord`): a record must name a command or
agent file under ``.claude/commands`` or ``.claude/agents`` (a relative ``.md`` path, no
``..``) and versions by their hash. ``.journal/`` is protected from the model's tools, but a
line that fails — ``"file": "../victim/pwned.txt"``, ``".claude/settings.local.json"``, a
number where text belongs — is reported as tampered with (``--history`` names it, exit 1) and
never applied (``--revert`` refuses it). A revert writes only through the workspace's
no-follow walk (:func:`journal_agent.tools.write.atomic_write`), so a command file that became
a symlink leading out is not followed either.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.locks import held
from journal_agent.paths import state_dir
from journal_agent.secret_text import redact_secrets
from journal_agent.tools._file_versions import history_dir

_KINDS = (("commands", ".claude/commands"), ("agents", ".claude/agents"))
_STAMP = "%Y%m%dT%H%M%S.%fZ"


_DIGEST = re.compile(r"[0-9a-f]{16}")


class FeedbackRecord(BaseModel):
    """One line of ``feedback.jsonl``, validated: nothing in it may point outside the files
    the loop tracks."""

    model_config = ConfigDict(extra="forbid", strict=True)

    n: int = Field(ge=1)
    time: str  # ISO UTC
    kind: Literal["feedback", "revert"]
    file: str  # relative to the workspace root: .claude/commands/… or .claude/agents/….md
    feedback: str = Field(max_length=100_000)
    before: str  # content hash of the version before
    after: str  # content hash of the version after
    added: int = Field(ge=0)
    removed: int = Field(ge=0)
    reverts: int | None = None

    @field_validator("file")
    @classmethod
    def _tracked(cls, v: str) -> str:
        rel = PurePosixPath(v)
        if (
            rel.is_absolute()
            or "\\" in v
            or any(p in ("", ".", "..") for p in v.split("/"))
            or rel.parts[:2] not in _TRACKED
            or rel.suffix != ".md"
        ):
            raise ValueError(f"it names {v}, not a command or agent file under .claude/")
        return v

    @field_validator("before", "after")
    @classmethod
    def _digest(cls, v: str) -> str:
        if not _DIGEST.fullmatch(v):
            raise ValueError(f"{v!r} is not a version's hash")
        return v

    @field_validator("time")
    @classmethod
    def _time(cls, v: str) -> str:
        datetime.fromisoformat(v)  # ValueError: not a time
        return v

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


@dataclass(frozen=True)
class Tampered:
    """A line of ``feedback.jsonl`` that is not a valid record: reported, never applied."""

    line: int
    n: int | None  # the record number it claims, when it claims one
    why: str

    def sentence(self, path: Path) -> str:
        which = f"record #{self.n}" if self.n is not None else "a record"
        return (
            f"line {self.line} of {path} ({which}) was tampered with: {self.why}; it is not "
            "applied — remove that line."
        )


_TRACKED = ((".claude", "commands"), (".claude", "agents"))


def _tampered(number: int, line: str) -> FeedbackRecord | Tampered:
    try:
        data = json.loads(line)
    except ValueError:
        return Tampered(number, None, "it is not JSON")
    if not isinstance(data, dict):
        return Tampered(number, None, "it is not a JSON object")
    claimed = data.get("n") if type(data.get("n")) is int else None
    try:
        return FeedbackRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        return Tampered(number, claimed, f"{where}: {msg}" if where else msg)


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


def _bundled(rel: Path) -> bytes | None:
    """The plugin's own version of an ejected file (``.claude/commands/learn.md`` →
    ``commands/learn.md`` of the plugin)."""
    from journal_agent.paths import plugin_root

    try:
        return (plugin_root() / Path(*rel.parts[1:])).read_bytes()
    except OSError:
        return None


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
            anchor=self.root,
        )

    # -- storage ----------------------------------------------------------------------------
    def read(self) -> tuple[list[FeedbackRecord], list[Tampered]]:
        """The valid records, and the lines that are not (see :class:`Tampered`)."""
        try:
            raw = confined.read(self.root, self.path)
            if raw is None:
                return [], []
            text = raw.decode("utf-8")
        except confined.Refused:
            raise
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read {self.path} ({exc}); fix or move it aside.") from None
        records, tampered = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                item = _tampered(number, line)
                (records if isinstance(item, FeedbackRecord) else tampered).append(item)
        return records, tampered

    def records(self) -> list[FeedbackRecord]:
        return self.read()[0]

    def _append(self, record: FeedbackRecord) -> None:
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        confined.append(self.root, self.path, line, durable=True)

    def store(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()[:16]
        # Named by content: a version already there is this one (create never overwrites).
        confined.create(self.root, self.versions / f"{digest}.md", data)
        return digest

    def version(self, digest: str) -> bytes:
        data = None
        if digest and all(c in "0123456789abcdef" for c in digest):  # (a record names it)
            data = confined.read(self.root, self.versions / f"{digest}.md")
        if data is None:
            raise UserError(
                f"version {digest} is missing from {self.versions}; that record cannot be "
                "shown or reverted."
            )
        return data

    def get(self, n: int) -> FeedbackRecord:
        records, tampered = self.read()
        for bad in tampered:
            if bad.n == n:
                raise UserError(f"feedback {bad.sentence(self.path)}")
        for record in records:
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
        folder = self.dir / path.relative_to(self.root)
        for name in confined.listdir(self.root, folder):  # (a link there: Refused, never read)
            try:
                taken = datetime.strptime(name.removesuffix(".md"), _STAMP).replace(tzinfo=UTC)
            except ValueError:
                continue
            if not name.endswith(".md") or (since is not None and taken <= since):
                continue
            kept = confined.read(self.root, folder / name)
            if kept is not None:
                return kept
        if mine:
            return self.version(mine[-1].after)
        # Ejected before eject kept a baseline: the plugin's own file of that name, if any.
        original = _bundled(path.relative_to(self.root))
        return original if original is not None else current

    def _new(
        self,
        records: list[FeedbackRecord],
        now: datetime,
        kind: Literal["feedback", "revert"],
        rel: str,
        feedback: str,
        before: bytes,
        after: bytes,
        reverts: int | None = None,
    ) -> FeedbackRecord:
        added, removed = _counts(before, after)
        claimed = [t.n for t in self.read()[1] if t.n is not None]
        return FeedbackRecord(
            n=max([*(r.n for r in records), *claimed], default=0) + 1,
            time=now.isoformat(timespec="microseconds"),
            kind=kind,
            file=rel,
            # What the user typed is kept (and shown by --history): never a key pasted into it
            # (nor one an earlier record kept, copied by a revert).
            feedback=redact_secrets(feedback),
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
        from journal_agent.tools._file_versions import keep_previous
        from journal_agent.tools.base import ToolError
        from journal_agent.tools.confined_paths import resolve_path
        from journal_agent.tools.write import (
            atomic_write,
            current_fingerprint,
            make_parents,
            writer_lock,
        )

        target = self.get(n)
        wanted = self.version(target.before)
        with self.locked():
            try:
                # Resolved inside the workspace (a symlink leading out is refused) and written
                # through a no-follow walk from the root.
                path = resolve_path(self.root, target.file)
                if path.relative_to(self.root).parts[:2] not in _TRACKED:
                    raise ToolError(
                        f"{target.file} leads to {path}, not a command or agent file under "
                        ".claude/; it is not reverted."
                    )
                with writer_lock(self.root, path):
                    now = current_fingerprint(self.root, path)
                    current = now[1] if now is not None else b""
                    if current == wanted:
                        raise UserError(
                            f"{target.file} is already as it was before change #{n}; nothing "
                            "to revert."
                        )
                    keep_previous(self.root, path, current or None)
                    make_parents(self.root, path)
                    atomic_write(self.root, path, wanted)
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
