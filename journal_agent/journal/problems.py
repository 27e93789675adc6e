"""What ``journal check`` reports: a :class:`Problem` per rule broken, in a :class:`CheckReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from journal_agent.journal.model import EntrySummary


class ProblemJson(TypedDict):
    entry: str
    kind: str
    detail: str
    line: int | None
    moved_to: NotRequired[str]
    diff: NotRequired[list[str]]
    other: NotRequired[str]


class CheckedEntry(EntrySummary):
    problems: int  # how many of the report's problems are this entry's


class CheckReportJson(TypedDict):
    """``journal check --json``."""

    ok: bool
    entries: list[CheckedEntry]
    problems: list[ProblemJson]


@dataclass
class Problem:
    entry: str
    kind: str
    detail: str
    line: int | None = None
    # A moved reference: where its lines are now (``path:N-M``), what `check --fix` writes.
    moved_to: str | None = None
    # A changed reference: the recorded lines against those there now (unified diff lines).
    diff: list[str] | None = None
    # A contradiction or a near-duplicate: the other entry of the pair.
    other: str | None = None

    def to_dict(self) -> ProblemJson:
        out: ProblemJson = {
            "entry": self.entry,
            "kind": self.kind,
            "detail": self.detail,
            "line": self.line,
        }
        if self.moved_to is not None:
            out["moved_to"] = self.moved_to
        if self.diff:
            out["diff"] = self.diff
        if self.other is not None:
            out["other"] = self.other
        return out


@dataclass
class CheckReport:
    ok: bool
    entries: list[CheckedEntry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> CheckReportJson:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "problems": [p.to_dict() for p in self.problems],
        }
