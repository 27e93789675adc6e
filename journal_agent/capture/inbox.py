"""The capture inbox as other code reads it: moments waiting to become journal entries.

    from journal_agent.capture import read_inbox, dismiss
    for moment in read_inbox(root):          # waiting moments, oldest first
        print(moment.id, moment.text, [f.spec() for f in moment.files])
    dismiss(root, moment.id)                 # or dismiss(root, moment.id, "written")
    accept(root, moment.id)                  # queue it: /learn offers accepted moments first

The file and its format are :mod:`journal_agent.capture.store` (what the hooks write). The
records are dataclasses rather than pydantic models because the hooks' side is stdlib only;
:meth:`Moment.from_dict` checks each line by hand and a line that is not a moment is skipped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from journal_agent.capture import store
from journal_agent.capture.store import waiting_count

__all__ = [
    "FileEdit",
    "Inbox",
    "Moment",
    "accept",
    "dismiss",
    "find",
    "inbox_path",
    "read_inbox",
    "waiting_count",
]


def inbox_path(root: Path) -> Path:
    """``.journal/inbox.jsonl`` of the project at ``root``."""
    return Path(store.inbox_file(root))


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
    kind: str  # "insight" | "measurement" | "revise" (the code an entry explains changed)
    text: str  # the block's text, private spans removed and secrets redacted
    time: str  # ISO 8601 UTC, when the hook captured it
    session_id: str = ""
    prompt_id: str = ""
    agent: str = ""  # the sub-agent's type for SubagentStop moments, "" for the main thread
    files: tuple[FileEdit, ...] = ()
    records: tuple[str, ...] = ()  # measurement record ids created this turn, cite as [m:id]
    hash: str = ""
    dismissed: str = ""  # "" while waiting; else the tombstone's reason ("dismissed", "written")
    accepted: str = ""  # when the user accepted it for /learn (ISO 8601 UTC); "" if not
    entry: str = ""  # a revise moment: the entry whose code changed

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = [{"path": f.path, "lines": [list(r) for r in f.lines]} for f in self.files]
        data["records"] = list(self.records)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Moment:
        """A moment from one inbox line; ValueError when the line is not one."""
        if not all(isinstance(data.get(k), str) for k in ("id", "kind", "text", "time")):
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
            entry=str(data.get("entry") or ""),
        )


def read_inbox(root: Path, *, include_dismissed: bool = False) -> list[Moment]:
    """The moments in the inbox: those waiting, or all with ``dismissed`` set. The moments
    the user accepted (in the view) come first, in the order accepted — ``/learn`` offers
    them first —, then the others, oldest first.

    Lines that are not moments (torn by a crash, edited by hand) are skipped; a moment that
    appears twice (two sessions caught the same text at once) is listed once.
    """
    from journal_agent.foreign_changes import INBOX, check

    check(root, INBOX)  # a change by another hand (a clone's committed inbox): said first
    moments: dict[str, Moment] = {}
    done: dict[str, str] = {}
    accepted: dict[str, str] = {}
    for item in store.lines(root):
        dismissed = item.get("dismissed")
        if isinstance(dismissed, str):
            done[dismissed] = str(item.get("reason") or "dismissed")
            continue
        chosen = item.get("accepted")
        if isinstance(chosen, str):
            accepted.setdefault(chosen, str(item.get("time") or ""))
            continue
        try:
            moment = Moment.from_dict(item)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        moments.setdefault(moment.id, moment)
    out = []
    for moment in moments.values():
        if moment.id in accepted:
            moment = replace(moment, accepted=accepted[moment.id])
        if moment.id not in done:
            out.append(moment)
        elif include_dismissed:
            out.append(replace(moment, dismissed=done[moment.id]))
    order = list(accepted)
    out.sort(key=lambda m: order.index(m.id) if m.accepted else len(order))  # stable
    return out


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


def accept(root: Path, moment_id: str) -> Moment:
    """Queue a waiting moment for ``/learn`` (by id or unique id prefix): an appended marker
    ``{"accepted": id, "time"}``; nothing is written to the journal. ``/learn`` with no
    topic offers accepted moments first and marks each written once its entry is in.
    Accepting a moment twice changes nothing. KeyError if no waiting moment matches."""
    moment = find(root, moment_id)
    if not moment.accepted:
        when = store.now_utc()
        store.append(root, [{"accepted": moment.id, "time": when}])
        moment = replace(moment, accepted=when)
    return moment


def dismiss(root: Path, moment_id: str, reason: str = "dismissed") -> Moment:
    """Mark a waiting moment (by id or unique id prefix) done; returns it. KeyError if none."""
    moment = find(root, moment_id)
    store.append(root, [{"dismissed": moment.id, "reason": reason, "time": store.now_utc()}])
    return moment


class Inbox:
    """``.journal/inbox.jsonl`` of one workspace, for those holding a workspace rather than a
    path (:attr:`journal_agent.workspace.Workspace.inbox`: the CLI, the tool, the view). Light:
    a path; each call reads the file, through the functions above."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = inbox_path(self.root)

    def read(self, *, include_dismissed: bool = False) -> list[Moment]:
        return read_inbox(self.root, include_dismissed=include_dismissed)

    def find(self, key: str) -> Moment:
        return find(self.root, key)

    def accept(self, moment_id: str) -> Moment:
        return accept(self.root, moment_id)

    def dismiss(self, moment_id: str, reason: str = "dismissed") -> Moment:
        return dismiss(self.root, moment_id, reason)
