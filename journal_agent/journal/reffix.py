"""Writing references back: ``journal check --fix`` (moved references follow their lines) and
``journal refresh`` (the code as it is now becomes an entry's baseline).

Both run under the journal lock and replace files atomically. ``--fix`` rewrites only
references whose recorded lines were found, unchanged, elsewhere (``moved_ref``); a reference
whose lines changed is the entry's author's to judge, so ``refresh`` records it only when
asked for that reference by name (``--accept path:N-M``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.foreign_changes import remember
from journal_agent.journal._text import split_lines
from journal_agent.journal.model import Entry, parse_journal
from journal_agent.journal.places import recorded_names
from journal_agent.journal.refcheck import anchors_for, new_spec
from journal_agent.journal.refs import Anchor, CodeRef, FileCache, RefStore, resolve_problem
from journal_agent.journal.relocate import Relocator
from journal_agent.journal.store import JournalStore, changed_since, decode_journal
from journal_agent.paths import refs_file


class FixedJson(TypedDict):
    entry: str
    line: int
    old: str  # the reference as it was
    new: str  # as `check --fix` rewrote it


@dataclass
class Fixed:
    entry: str
    line: int  # the journal line of the reference
    old: str
    new: str

    def to_dict(self) -> FixedJson:
        return {"entry": self.entry, "line": self.line, "old": self.old, "new": self.new}


@dataclass
class FixOutcome:
    fixed: list[Fixed] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[FixedJson]]:
        return {"fixed": [f.to_dict() for f in self.fixed]}


def fix_moved(root: Path) -> FixOutcome:
    """Rewrite every moved reference to where its lines are now; nothing else changes."""
    store = JournalStore(Path(root))
    refstore = RefStore(refs_file(store.root))
    with store._locked():
        confined.remove_stale_temps(store.root, store.path)
        for _ in range(5):
            found = confined.snapshot(store.root, store.path)
            if found is None:
                return FixOutcome()
            st, data = found
            text = decode_journal(data, store.path)
            files = FileCache(store.root)
            relocator = Relocator(store.root, files)
            recorded = refstore.anchors()
            lines = split_lines(text)
            outcome, anchors = FixOutcome(), {}
            for entry in parse_journal(text).entries:
                moved = _moved(entry, recorded.get(entry.id, {}), relocator)
                if not moved:
                    continue
                anchors[entry.id] = _rewrite(store.root, entry, recorded[entry.id], moved, files)
                for ref, spec in sorted(moved, key=lambda m: -m[0].span[0]):
                    a, b = ref.span
                    line = lines[ref.line - 1]
                    lines[ref.line - 1] = line[:a] + spec + line[b:]
                    outcome.fixed.append(Fixed(entry.id, ref.line, line[a:b], spec))
            if not outcome.fixed:
                return outcome
            if changed_since(store.root, store.path, st):
                continue  # an editor saved meanwhile: start again from its content
            # Before the journal: a crash in between leaves unused anchors, never an entry whose
            # new references have none; a failed write (a full disk) takes them back.
            undo = [refstore.record(entry_id, kept) for entry_id, kept in anchors.items()]
            data = "".join(lines).encode("utf-8")
            try:
                written = confined.replace(store.root, store.path, data)
            except BaseException:
                for take_back in reversed(undo):
                    take_back()
                raise
            remember(store.root, store.path.name, data, written)
            outcome.fixed.sort(key=lambda f: f.line)
            return outcome
    raise UserError(
        f"{store.path} kept changing while fixing references; close the editor that is saving "
        "it and try again."
    )


def _moved(
    entry: Entry, anchors: dict[str, Anchor], relocator: Relocator
) -> list[tuple[CodeRef, str]]:
    out = []
    for ref in entry.refs:
        anchor = anchors.get(ref.key)
        if anchor is None or ref.span[0] < 0:
            continue
        found = relocator.locate(ref, anchor)
        if found.state == "moved":
            out.append((ref, new_spec(ref, found)))
    return out


def _rewrite(
    root: Path,
    entry: Entry,
    anchors: dict[str, Anchor],
    moved: list[tuple[CodeRef, str]],
    files: FileCache,
) -> dict[str, Anchor]:
    """The entry's anchors with each moved reference under its new key, recorded afresh there
    (its lines hash as before; the context and commit are those of the new place)."""
    kept = dict(anchors)
    new_refs = []
    for ref, spec in moved:
        kept.pop(ref.key, None)
        path, _, span = spec.rpartition(":")
        start, _, end = span.partition("-")
        new_refs.append(CodeRef(path, int(start), int(end or start), ref.line))
    for key, anchor in anchors_for(root, new_refs, files).items():
        kept[key] = anchor
    return kept


@dataclass
class Refreshed:
    """What ``journal refresh`` recorded: the anchors, and the references it could not record
    with why (no such file, lines past its end, outside the workspace)."""

    entry: str
    anchors: dict[str, Anchor]
    skipped: dict[str, str] = field(default_factory=dict)


def refresh(root: Path, key: str, accept: list[str] | None = None) -> Refreshed:
    """Record the current content of an entry's references as its new baseline.

    A reference whose lines changed is recorded only when named in ``accept`` (the entry was
    brought up to date with the code), and only when its lines are where what it cited is now:
    not when that is probably elsewhere (the reference must point there first) nor when the
    definition it cited is gone and other code holds its line numbers. A moved one is left to
    ``check --fix``. Any of these refuses the whole refresh, with what to do for each.
    """
    store = JournalStore(Path(root))
    accepted = set(accept or [])
    with store._locked():
        journal = store.load()
        entry = journal.get(key)
        if entry is None:
            raise UserError(
                f"no single entry matches {key!r}; use an id or number from "
                "`journal-agent journal list`."
            )
        unknown = accepted - {ref.key for ref in entry.refs}
        if unknown:
            raise UserError(
                f"{', '.join(sorted(unknown))} is not a reference of {entry.id}; accept one of "
                f"its references: {', '.join(sorted({r.key for r in entry.refs})) or 'none'}."
            )
        refstore = RefStore(refs_file(store.root))
        recorded = refstore.anchors().get(entry.id, {})
        files = FileCache(store.root)
        relocator = Relocator(store.root, files)
        refused = []
        for ref in entry.refs:
            why = _refused(ref, recorded.get(ref.key), ref.key in accepted, relocator)
            if why is not None:
                refused.append(why)
        if refused:
            raise UserError(f"nothing recorded for {entry.id}: {'; '.join(refused)}.")
        anchors = anchors_for(store.root, entry.refs, files)
        skipped = {
            ref.key: resolve_problem(ref, files) or f"{ref.key}: its lines could not be read"
            for ref in entry.refs
            if ref.key not in anchors
        }
        refstore.record(entry.id, anchors)
    return Refreshed(entry.id, anchors, skipped)


def _refused(
    ref: CodeRef, anchor: Anchor | None, accepted: bool, relocator: Relocator
) -> str | None:
    """Why this reference must not be recorded as it is now, or None."""
    found = relocator.locate(ref, anchor)
    if found.state == "moved":
        return (
            f"{ref.key} points at lines that moved to {new_spec(ref, found)} (run "
            "`journal-agent journal check --fix`)"
        )
    if found.state != "changed" or anchor is None:
        return None
    if found.likely is not None and found.likely != (ref.path, ref.start, ref.end):
        path, start, end = found.likely
        to = f"{path}:{start}" if start == end else f"{path}:{start}-{end}"
        return (
            f"{ref.key} now holds other lines: what it cited is probably at {to} (change the "
            f"reference to {to} in the entry once it says what the code says now, then refresh)"
        )
    if found.likely is None and _elsewhere_now(ref, anchor, relocator):
        return (
            f"{ref.key} is no longer in the code it cited ({found.detail}); point the entry at "
            "the code it explains now, then refresh"
        )
    if not accepted:
        return (
            f"{ref.key} changed since the entry was written (see `journal-agent journal "
            f"check`; once the entry says what the code says now, add --accept {ref.key})"
        )
    return None


def _elsewhere_now(ref: CodeRef, anchor: Anchor, relocator: Relocator) -> bool:
    """The reference's lines now sit in other definitions than the ones recorded."""
    want = recorded_names(anchor, ref.path)
    view = relocator.view(ref.path)
    if not want or view is None or ref.end > len(view.lines):
        return False
    return view.names(ref.start, ref.end - ref.start + 1) != want
