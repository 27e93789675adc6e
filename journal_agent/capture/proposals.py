"""The 📚 session rows SessionEnd proposed: listed, applied to the ledger on request, or dropped.

A proposal is ``.journal/capture/proposals/<date>-<session>.json``: ``{"session_id", "operations":
[{"op": "add_session", "date", "topic", "outcome"}]}``, the shape ``journal-agent ledger apply``
takes. Applying one goes through the ledger store (atomic, under the journal's lock, every other
line kept) and then moves the file to ``proposals/done/``; nothing applies one unasked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent import confined
from journal_agent.capture.status import proposals_dir
from journal_agent.errors import UserError

if TYPE_CHECKING:
    from journal_agent.workspace import Workspace


@dataclass(frozen=True)
class Proposal:
    path: Path
    session_id: str
    operations: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "session_id": self.session_id,
            "operations": self.operations,
        }


def proposals(ws: Workspace) -> list[Proposal]:
    """The proposals waiting, oldest first; unreadable files are skipped."""
    out = []
    folder = Path(proposals_dir(ws.root))
    for name in confined.listdir(ws.root, folder):
        path = folder / name
        if not name.endswith(".json"):
            continue
        try:
            data = json.loads(confined.read(ws.root, path) or b"")
            ops = [op for op in data["operations"] if isinstance(op, dict)]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a link or FIFO planted there is no proposal
        out.append(Proposal(path, str(data.get("session_id") or ""), ops))
    return out


def pick(ws: Workspace, which: str | None) -> list[Proposal]:
    """All proposals (``which`` None) or the one whose 1-based number or file name is given."""
    found = proposals(ws)
    if which is None:
        if not found:
            raise UserError("no session row is proposed; SessionEnd proposes one after a session.")
        return found
    for n, proposal in enumerate(found, 1):
        if which in (str(n), proposal.path.name, proposal.path.stem):
            return [proposal]
    raise UserError(f"no proposed session row {which!r}; `journal-agent inbox session` lists them.")


def apply(ws: Workspace, chosen: list[Proposal]) -> list[str]:
    """Add the chosen rows to learning_ledger.md (all or none), then file the proposals away."""
    from journal_agent.learning.ledger_ops import LedgerOperation

    ops = [LedgerOperation(**op) for p in chosen for op in p.operations]
    result = ws.ledger.update(ops)
    done(ws, chosen)
    return list(result.changes)


def done(ws: Workspace, chosen: list[Proposal]) -> None:
    """Move the chosen proposals to ``proposals/done/`` (kept, never deleted)."""
    for proposal in chosen:
        target = proposal.path.parent / "done" / proposal.path.name
        confined.rename(ws.root, proposal.path, target)
