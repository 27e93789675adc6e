"""The capture inbox: ``.journal/inbox.jsonl``, the learning moments the hooks caught.

One JSON object per line, append-only. A moment is written once by a hook (one ``write`` on an
``O_APPEND`` descriptor, so concurrent sessions never interleave or lose lines) and never
rewritten; dismissing one appends a tombstone ``{"dismissed": "<id>", ...}``. Nothing here
takes a lock or rewrites the file, so a hook never waits for a CLI command and vice versa.

Stdlib only: the Stop hook imports this module under ``python3 -I -S`` (no site-packages), so
the record is a dataclass checked by hand rather than a pydantic model.

    from journal_agent.capture import read_inbox, dismiss
    for moment in read_inbox(root):          # waiting moments, oldest first
        print(moment.id, moment.text, moment.files)
    dismiss(root, moment.id)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

INBOX = "inbox.jsonl"
TEXT_LIMIT = 8000  # characters of one moment's text; an Insight block is a few hundred
_TAIL = 4 << 20  # bytes of the inbox read for dedupe hashes: years of moments


@dataclass(frozen=True)
class FileEdit:
    """A file the turn edited, relative to the project root, with the new lines' ranges."""

    path: str
    lines: tuple[tuple[int, int], ...] = ()

    def spec(self) -> str:
        """``path:12-18, 40`` — the ranges as ``journal check`` reads references."""
        if not self.lines:
            return self.path
        parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in self.lines]
        return f"{self.path}:{', '.join(parts)}"


@dataclass(frozen=True)
class Moment:
    """One thing worth learning from a turn: an ``★ Insight`` block, or a measurement."""

    id: str  # the first 12 hex digits of ``hash``: what `inbox show/dismiss` accept
    kind: str  # "insight" | "measurement"
    text: str  # the block's text, private spans removed and secrets redacted
    time: str  # ISO 8601 UTC, when the hook captured it
    session_id: str = ""
    prompt_id: str = ""
    agent: str = ""  # the sub-agent's type for SubagentStop moments, "" for the main thread
    files: tuple[FileEdit, ...] = ()
    records: tuple[str, ...] = ()  # measurement record ids created this turn, cite as [m:id]
    hash: str = ""  # sha256 of kind, text and records: the same moment is captured once
    dismissed: str = ""  # "" while waiting; else the tombstone's reason ("dismissed", "written")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = [{"path": f.path, "lines": [list(r) for r in f.lines]} for f in self.files]
        data["records"] = list(self.records)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Moment:
        """A moment from one inbox line; ValueError when the line is not one."""
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("id", "kind", "text", "time")
        ):
            raise ValueError("not a moment")
        files = []
        for item in data.get("files") or []:
            ranges = tuple(
                (int(r[0]), int(r[1]))
                for r in item.get("lines") or []
                if isinstance(r, list | tuple) and len(r) == 2
            )
            files.append(FileEdit(str(item["path"]), ranges))
        return cls(
            id=data["id"],
            kind=data["kind"],
            text=data["text"],
            time=data["time"],
            session_id=str(data.get("session_id") or ""),
            prompt_id=str(data.get("prompt_id") or ""),
            agent=str(data.get("agent") or ""),
            files=tuple(files),
            records=tuple(str(r) for r in data.get("records") or []),
            hash=str(data.get("hash") or ""),
        )


def inbox_path(root: Path) -> Path:
    return Path(root) / ".journal" / INBOX


def content_hash(kind: str, text: str, records: tuple[str, ...] | list[str]) -> str:
    """What makes two moments the same: their kind, their whitespace-normalised text, records."""
    norm = " ".join(text.split())
    return hashlib.sha256(f"{kind}\0{norm}\0{','.join(records)}".encode()).hexdigest()


def new_moment(kind: str, text: str, **fields: Any) -> Moment:
    text = text[:TEXT_LIMIT]
    records = tuple(fields.pop("records", ()))
    digest = content_hash(kind, text, records)
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Moment(digest[:12], kind, text, now, records=records, hash=digest, **fields)


def known_hashes(root: Path) -> set[str]:
    """The hashes of moments already in the inbox (its last few MB), waiting or dismissed."""
    path = inbox_path(root)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL))
            data = f.read()
    except FileNotFoundError:
        return set()
    out: set[str] = set()
    for raw in data.splitlines():
        start = raw.find(b'"hash": "')
        if start >= 0:
            out.add(raw[start + 9 : start + 73].decode("ascii", "replace"))
    return out


def append_moments(root: Path, moments: list[Moment]) -> None:
    """Append ``moments`` in one write (O_APPEND: concurrent writers never interleave)."""
    if moments:  # ``dismissed`` is derived from the tombstones, never stored on the moment
        _append(root, [{k: v for k, v in m.to_dict().items() if k != "dismissed"} for m in moments])


def dismiss(root: Path, moment_id: str, reason: str = "dismissed") -> Moment:
    """Mark a waiting moment (by id or unique id prefix) done; returns it. KeyError if none."""
    moment = find(root, moment_id)
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    _append(root, [{"dismissed": moment.id, "reason": reason, "time": now}])
    return moment


def find(root: Path, key: str) -> Moment:
    """The waiting moment ``key`` names: its 1-based position in the list, its id, or a
    unique prefix of its id. KeyError with a sentence when none or several match."""
    waiting = read_inbox(root)
    if key.isdigit() and len(key) < 6:
        n = int(key)
        if 1 <= n <= len(waiting):
            return waiting[n - 1]
        raise KeyError(f"there are {len(waiting)} waiting moments, so no number {n}")
    found = [m for m in waiting if m.id.startswith(key)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise KeyError(f"no waiting moment has the id {key!r}")
    raise KeyError(f"{len(found)} waiting moments have ids starting with {key!r}; give more")


def read_inbox(root: Path, *, include_dismissed: bool = False) -> list[Moment]:
    """The moments in the inbox, oldest first: those waiting, or all with ``dismissed`` set.

    Lines that are not moments (torn by a crash, edited by hand) are skipped; a moment that
    appears twice (two sessions caught the same text at once) is listed once.
    """
    try:
        data = inbox_path(root).read_bytes()
    except FileNotFoundError:
        return []
    moments: dict[str, Moment] = {}
    done: dict[str, str] = {}
    for raw in data.splitlines():
        try:
            item = json.loads(raw)
            if isinstance(item, dict) and isinstance(item.get("dismissed"), str):
                done[item["dismissed"]] = str(item.get("reason") or "dismissed")
                continue
            moment = Moment.from_dict(item)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        moments.setdefault(moment.id, moment)
    out = []
    for moment in moments.values():
        if moment.id in done:
            if include_dismissed:
                out.append(_with(moment, dismissed=done[moment.id]))
        else:
            out.append(moment)
    return out


def waiting_count(root: Path) -> int:
    return len(read_inbox(root))


def _with(moment: Moment, **changes: Any) -> Moment:
    from dataclasses import replace

    return replace(moment, **changes)


def _append(root: Path, items: list[dict[str, Any]]) -> None:
    path = inbox_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(
        json.dumps(item, ensure_ascii=False, sort_keys=True).encode() + b"\n" for item in items
    )
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a crash tore the previous line: keep ours whole
        written = os.write(fd, data)
        if written != len(data):  # a full disk mid-write: say so rather than leave half a line
            raise OSError(28, "short write to the inbox (disk full?)")
    finally:
        os.close(fd)
