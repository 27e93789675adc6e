"""Review that re-checks its code: the lines an entry's card explains, as they are now.

A card made from an entry shows its references' lines where they are today (a moved
reference's new place; a changed one's likely place, with the diff against what the entry was
written about). When the code changed since the entry was written, the card asks whether the
explanation still holds:

- **it still holds** — :func:`still_holds` records the code as it is now as the entry's
  baseline (``journal refresh`` with the changed references accepted; refused, with what to do,
  when a reference points at lines that no longer hold what it cited);
- **revise the entry** — :func:`revise_later` leaves a ``revise`` moment in the inbox naming the
  entry and what changed, so ``/learn`` (or the user) brings the entry up to date.

Files are read through the caller's ``read`` (``journal_agent.view.files.WorkspaceFiles`` for
the terminal, the view and the exports): a secret or denied file is listed, never shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from journal_agent.journal.model import Entry
from journal_agent.journal.refs import Anchor, FileCache
from journal_agent.journal.relocate import Relocator

MAX_REFS = 8  # references shown per card
MAX_LINES = 40  # lines shown per reference
# What "the code changed" means for a card: the lines differ, or nothing holds them any more.
CHANGED = frozenset(["changed", "gone"])

Read = Callable[[str], str | None]  # a workspace file's text, or None when it is not shown


@dataclass(frozen=True)
class CitedLines:
    ref: str  # the reference as the entry writes it
    state: str  # fresh | moved | changed | gone | unrecorded | hidden
    path: str  # where the lines shown are (moved or changed elsewhere: the new place)
    start: int
    end: int
    lines: tuple[str, ...]  # the lines there now (at most MAX_LINES)
    detail: str
    diff: tuple[str, ...] = ()  # changed: recorded against now

    @property
    def where(self) -> str:
        return (
            f"{self.path}:{self.start}"
            if self.start == self.end
            else (f"{self.path}:{self.start}-{self.end}")
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lines": list(self.lines), "diff": list(self.diff)}


def cited_code(
    root: Path, entry: Entry, anchors: Mapping[str, Anchor], read: Read
) -> list[CitedLines]:
    """The lines each of the entry's references cites, as they are now."""
    files = FileCache(Path(root))
    relocator = Relocator(Path(root), files)
    texts: dict[str, list[str] | None] = {}
    out: list[CitedLines] = []
    for ref in entry.refs[:MAX_REFS]:
        found = relocator.locate(ref, anchors.get(ref.key))
        path, start, end = ref.path, ref.start, ref.end
        if found.state == "moved":
            path, start, end = found.path, found.start, found.end
        elif found.state == "changed" and found.likely is not None:
            path, start, end = found.likely
        if path not in texts:
            text = read(path)
            texts[path] = None if text is None else text.splitlines()
        lines = texts[path]
        if lines is None and found.state != "gone":
            detail = f"{path} is not shown (a secret or a file your settings deny)"
            out.append(CitedLines(ref.key, "hidden", path, start, end, (), detail))
            continue
        shown = tuple((lines or [])[start - 1 : min(end, start + MAX_LINES - 1)])
        if found.state == "gone":
            shown = ()
        detail = {
            "fresh": "unchanged since the entry was written",
            "unrecorded": "nothing was recorded for it (an entry written by hand)",
        }.get(found.state, found.detail)
        out.append(
            CitedLines(ref.key, found.state, path, start, end, shown, detail, tuple(found.diff))
        )
    return out


def code_changed(cited: list[CitedLines]) -> bool:
    return any(c.state in CHANGED for c in cited)


def still_holds(root: Path, entry_id: str, cited: list[CitedLines]) -> list[str]:
    """The learner says the explanation still holds: record the code as it is now (``journal
    refresh`` accepting the changed references). Returns the references recorded; UserError
    with what to do when one cannot be (moved lines first need ``check --fix``; lines that no
    longer hold what was cited need the entry to point elsewhere)."""
    from journal_agent.journal.reffix import refresh

    accept = [c.ref for c in cited if c.state == "changed"]
    done = refresh(Path(root), entry_id, accept)
    return sorted(done.anchors)


def revise_later(root: Path, entry: Entry, cited: list[CitedLines], why: str) -> str:
    """Leave a ``revise`` moment in the inbox for this entry (what changed, where the code is
    now); returns its id. The same change noted twice is one moment."""
    from journal_agent.capture import store

    changed = [c for c in cited if c.state in CHANGED]
    files = [{"path": c.path, "lines": [[c.start, c.end]]} for c in changed if c.state != "gone"]
    moment = store.revise_moment(
        entry.id, entry.title, [c.ref for c in changed], why, _changes(changed), files
    )
    store.append(str(root), [moment])
    return str(moment["id"])


def _changes(changed: list[CitedLines]) -> str:
    """The changed lines, briefly: each reference's removed and added lines (a few)."""
    parts = []
    for c in changed:
        minus = [x[1:].strip() for x in c.diff if x.startswith("-") and not x.startswith("---")]
        plus = [x[1:].strip() for x in c.diff if x.startswith("+") and not x.startswith("+++")]
        if not (minus or plus):
            parts.append(f"{c.ref}: {c.detail}")
            continue
        was = "; ".join(f"`{x}`" for x in minus[:3] if x) or "(nothing)"
        now = "; ".join(f"`{x}`" for x in plus[:3] if x) or "(nothing)"
        parts.append(f"{c.ref}: {was} → {now}")
    return "\n".join(parts)
