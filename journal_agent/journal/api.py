"""What the CLI, the agent tools and the MCP server call: validate + append, check, search,
related entries, repair. No printing here; callers render."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.foreign_changes import remember
from journal_agent.journal.model import EntrySummary, Journal, parse_journal
from journal_agent.journal.refcheck import anchors_for
from journal_agent.journal.refs import FileCache
from journal_agent.journal.search.hits import Hit
from journal_agent.journal.store import AppendResult, JournalStore
from journal_agent.journal.verify import (
    CheckReport,
    DraftError,
    Problem,
    check_journal,
    validate_draft,
)
from journal_agent.paths import JOURNAL_FILE
from journal_agent.secret_text import refuse_secrets

if TYPE_CHECKING:  # imported where used, inside the functions: search by meaning is heavy
    from collections.abc import Callable

    import numpy as np

    from journal_agent.journal.model import Entry
    from journal_agent.journal.reffix import FixOutcome, Refreshed
    from journal_agent.journal.search.duplicates import Check, Duplicate
    from journal_agent.journal.search.index import SearchIndex
    from journal_agent.journal.stream import JournalFile
    from journal_agent.workspace import Workspace

logger = logging.getLogger(__name__)

# The journal's state as the duplicate check saw it: (size, mtime_ns, inode).
_State = tuple[int, int, int]


@dataclass
class AppendOutcome:
    appended: bool
    entry_id: str | None = None
    line: int | None = None
    problems: list[Problem] = field(default_factory=list)
    forced: bool = False
    # Appended, but it may repeat an entry (weak evidence): one sentence each.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "appended": self.appended,
            "entry": self.entry_id,
            "line": self.line,
            "forced": self.forced,
            "problems": [p.to_dict() for p in self.problems],
            "warnings": self.warnings,
        }


def append_entry(ws: Workspace, text: str, force: bool = False) -> AppendOutcome:
    """Validate a draft entry and append it; problems reject it unless ``force``.

    Raises :class:`UserError` when the text is not one entry at all (nothing to force).
    """
    text = text.removeprefix("\ufeff")  # editors on Windows save drafts with a BOM
    # Not even with force: a key in the journal would be copied into every backup and share.
    refuse_secrets(text, JOURNAL_FILE)
    try:
        entry, problems = validate_draft(ws.root, text)
    except DraftError as exc:
        raise UserError(f"the entry was not appended: {exc}.") from None
    store = ws.journal
    # The duplicate check comes last: a draft with problems is fixed first (and the check
    # embeds the draft, which is wasted on one that changes); --force means keep both anyway.
    guarded = not problems and not force
    seen = _journal_state(store)
    similar = _check_duplicate(ws.index, entry) if guarded and seen is not None else None
    if similar is not None and similar.duplicate is not None:
        problems = [*problems, _duplicate_problem(entry.id, similar.duplicate)]
    if problems and not force:
        return AppendOutcome(appended=False, entry_id=entry.id, problems=problems)
    guard = _DuplicateGuard(ws, entry, seen, similar) if guarded else None
    try:
        result = _append_with_hashes(ws, text, entry, guard)
    except _Repeated as refused:
        problems = [_duplicate_problem(entry.id, refused.duplicate)]
        return AppendOutcome(appended=False, entry_id=entry.id, problems=problems)
    similar = guard.similar if guard is not None else similar
    outcome = AppendOutcome(True, result.entry_id, result.line, problems, forced=bool(problems))
    if similar is not None and similar.similar is not None:
        near = similar.similar
        outcome.warnings.append(
            f"this entry may repeat {near.describe()}; if it does, merge the two (journal-agent "
            f"journal show {near.id}, then edit it)"
        )
    _log_append(store, outcome)
    # Keep search current without a rebuild; failures here must not undo the append.
    try:
        appended = parse_journal(result.text).entries[0]
        appended.id = result.entry_id
        appended.start_line = result.line
        ws.index.note_append(
            appended,
            (result.old_size, result.old_mtime_ns),
            (result.new_size, result.new_mtime_ns),
            store.read_bytes(),
        )
        _remember_vector(ws.index, appended, similar)
    except Exception as exc:
        # The next search rebuilds the index from the markdown; `--verbose` says why.
        logger.debug("search index not updated after appending %s: %r", result.entry_id, exc)
    return outcome


def _journal_state(store: JournalStore) -> _State | None:
    st = store.stat()
    if st is None:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class _Repeated(Exception):
    def __init__(self, duplicate: Duplicate) -> None:
        self.duplicate = duplicate


class _DuplicateGuard:
    """Run under the journal lock just before the write: when another process appended (or the
    journal was edited) since the duplicate check, check again against what is there now, so
    two sessions writing the same entry at once cannot both land it. The draft's vector is
    reused: the second check costs one search."""

    def __init__(
        self, ws: Workspace, entry: Entry, seen: _State | None, similar: Check | None
    ) -> None:
        self.ws, self.entry, self.seen, self.similar = ws, entry, seen, similar

    def __call__(self) -> None:
        if _journal_state(self.ws.journal) == self.seen:
            return
        vector = self.similar.vector if self.similar is not None else None
        self.similar = _check_duplicate(self.ws.index, self.entry, vector)
        if self.similar is not None and self.similar.duplicate is not None:
            raise _Repeated(self.similar.duplicate)


def _check_duplicate(
    index: SearchIndex, entry: Entry, vector: np.ndarray | None = None
) -> Check | None:
    """The duplicate check; a journal it cannot read is reported by the append itself."""
    from journal_agent.journal.search.duplicates import check_draft

    try:
        return check_draft(index, entry, vector)
    except UserError:
        return None
    except Exception as exc:  # a broken cache under .journal/ must not block an append
        logger.debug("duplicate check skipped for %s: %r", entry.id, exc)
        return None


def _duplicate_problem(entry_id: str, dup: Duplicate) -> Problem:
    return Problem(
        entry_id,
        "duplicate",
        f"this entry repeats {dup.describe()}; update that entry instead (journal-agent "
        f"journal show {dup.id}, then edit it), or append with --force to keep both",
    )


def _remember_vector(index: SearchIndex, entry: Entry, similar: Check | None) -> None:
    """Cache the vector computed for the duplicate check as the new entry's embedding; with
    no check made (first entry) compute it now, so search never embeds at query time."""
    from journal_agent.journal.search import fusion
    from journal_agent.journal.search.embeddings import Unavailable, embed_text, get_embedder

    text = embed_text(entry.title, " ".join(entry.tags), entry.body)
    if similar is not None and similar.vector is not None and similar.embedder is not None:
        fusion.remember(index.root, text, similar.vector, similar.embedder)
        return
    try:
        embedder = get_embedder(index.root)
    except Unavailable:
        return
    fusion.remember(index.root, text, embedder.encode([text], fusion.ENTRY_TOKENS)[0], embedder)


def _append_with_hashes(
    ws: Workspace, text: str, entry: Entry, guard: _DuplicateGuard | None
) -> AppendResult:
    hashes = anchors_for(ws.root, entry.refs, FileCache(ws.root))

    def before_write(entry_id: str) -> Callable[[], None] | None:
        # Under the journal lock, before the journal is replaced: a crash in between leaves
        # an unused key, never an entry whose hashes are missing; a failed replace takes the
        # key back (JournalStore.append calls what this returns).
        if guard is not None:
            guard()
        return ws.refs.record(entry_id, hashes) if hashes else None

    return ws.journal.append(text, before_write=before_write)


def _log_append(store: JournalStore, outcome: AppendOutcome) -> None:
    """``.journal/appends.jsonl``: one line per append; forced appends keep their problems."""
    record = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        **outcome.to_dict(),
    }
    line = json.dumps(record, ensure_ascii=False) + "\n"
    try:
        confined.append(store.root, store.state / "appends.jsonl", line)
    except OSError as exc:
        # The entry is in: failing now would have the user append it again. `doctor` names
        # a planted link there; a full disk shows at the next write that matters.
        logger.debug("appends.jsonl not written: %s", exc)


def check(ws: Workspace) -> CheckReport:
    """Every entry checked (``verify.check_journal``: references, citations, numbers,
    sections, contradictions), and the near-duplicates that slipped in, each with its pair."""
    report = check_journal(ws.root)
    if len(report.entries) < 2:
        return report
    lines = {e["id"]: e["line"] for e in report.entries}
    found = _near_duplicates(ws, lines)
    if not found:
        return report
    counts: dict[str, int] = {}
    for p in found:
        counts[p.entry] = counts.get(p.entry, 0) + 1
    entries = list(report.entries)
    for e in entries:
        e["problems"] += counts.get(e["id"], 0)
    problems = sorted([*report.problems, *found], key=lambda p: (p.line or 0, p.kind))
    return CheckReport(ok=False, entries=entries, problems=problems)


def disagreements(ws: Workspace) -> list[Problem]:
    """The entries that disagree: contradictions (one configuration or one code line given two
    values) and near-duplicates, each on the later entry of its pair (``other``: the earlier)."""
    if not ws.journal.exists():
        return []
    from journal_agent.journal.verify import contradictions_in

    with open_journal(ws) as journal:  # an entry at a time, not the whole journal
        if len(journal) < 2:
            return []
        found = contradictions_in(ws.root, journal)
        lines = {span.id: span.line for span in journal.outline.spans}
    found += _near_duplicates(ws, lines)
    return sorted(found, key=lambda p: (p.line or 0, p.kind))


def _near_duplicates(ws: Workspace, lines: dict[str, int]) -> list[Problem]:
    from journal_agent.journal.search.near_duplicates import near_duplicates

    return [
        Problem(
            pair.second,
            "near_duplicate",
            f"this entry repeats {pair.seen.describe()}; merge the two (journal-agent journal "
            f"show {pair.first}), then remove this one",
            lines.get(pair.second),
            other=pair.first,
        )
        for pair in near_duplicates(ws.index)
    ]


def load(ws: Workspace) -> Journal:
    """The whole journal at once (small journals, tests); readers use :func:`open_journal`."""
    return ws.journal.load()


def open_journal(ws: Workspace, errors: str = "strict") -> JournalFile:
    """The journal read an entry at a time: memory bounded by one entry, whatever its size
    (``with open_journal(ws) as journal: for entry in journal.entries(): …``)."""
    return ws.journal.stream(errors)


def search(ws: Workspace, query: str, tags: list[str] | None = None, limit: int = 10) -> list[Hit]:
    return search_with_note(ws, query, tags, limit)[0]


def search_with_note(
    ws: Workspace,
    query: str,
    tags: list[str] | None = None,
    limit: int = 10,
    cached: bool = False,
    meaning: bool = True,
) -> tuple[list[Hit], str | None]:
    """Hits, and one sentence when meaning was not (fully) used: why, and what to do. A user
    who turned meaning off in the settings is not told again. ``cached``: a long-lived
    process keeps the phrases it looked up (the same hits, sooner the next time);
    ``meaning=False``: words only (the view's first answer to a keystroke)."""
    _require_journal(ws.journal)
    from journal_agent.journal.search import ranking

    index = ws.index
    if cached:  # the same index, ranking words from the phrases kept in memory (postings.py)
        from journal_agent.journal.search.index import SearchIndex

        index = SearchIndex(ws.root, cached=True)
    hits = ranking.search(index, query, tags, limit, semantic=meaning)
    note = index.semantic_note
    if note and "turned off" in note:
        note = None
    return hits, note


def semantic_status(ws: Workspace) -> str | None:
    """None when search uses meaning, else one sentence on why not (and how to turn it on)."""
    from journal_agent.journal.search.embeddings import status

    return status(ws.root)


def index(ws: Workspace, progress: Callable[[int, int], object] | None = None) -> tuple[int, int]:
    """Embed every entry that has no vector yet; returns (embedded now, entries)."""
    from journal_agent.journal.search import fusion
    from journal_agent.journal.search.embeddings import Unavailable

    _require_journal(ws.journal)
    try:
        return fusion.embed_missing(ws.index, progress)
    except Unavailable as exc:
        raise UserError(f"{exc}.") from None


def backlinks(ws: Workspace, key: str) -> list[EntrySummary]:
    """Entries whose 🔗 Related Concepts section links to the entry ``key``."""
    from journal_agent.journal.links import backlinks as find

    with open_journal(ws) as journal:
        entry = journal.find(key)
        if entry is None:
            raise UserError(
                f"no single entry matches {key!r}; use an id or number from "
                "`journal-agent journal list`."
            )
        return [e.summary() for e in find(journal.entries(), entry)]


def related(ws: Workspace, draft: str, limit: int = 5) -> list[Hit]:
    """Existing entries most similar to a draft (for its 🔗 Related Concepts section)."""
    if not ws.journal.exists():
        return []
    exclude: set[str] = set()
    with contextlib.suppress(IndexError):
        exclude.add(parse_journal(draft).entries[0].id)
    ws.journal.check_encoding()  # one sentence for a broken one (never the text held whole)
    from journal_agent.journal.search import ranking

    return ranking.related(ws.index, draft, limit, exclude)


def _require_journal(store: JournalStore) -> None:
    if not store.exists():
        store.read_bytes()  # raises the "no journal yet" UserError


@dataclass
class RepairOutcome:
    changed: bool
    backup: str | None
    fixed_lines: list[int]
    unrepaired_lines: list[int]
    guessed_lines: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return self.__dict__.copy()


def repair(ws: Workspace, dry_run: bool = False) -> RepairOutcome:
    """Fix invalid UTF-8 and double-encoded text, after writing ``<journal>.bak-<timestamp>``."""
    from journal_agent.journal.encoding import repair as repair_bytes

    store = ws.journal
    data = store.read_bytes()
    result = repair_bytes(data)
    if not result.changed or dry_run:
        return RepairOutcome(
            False, None, result.fixed_lines, result.unrepaired_lines, result.guessed_lines
        )
    with store._locked():
        current = store.read_bytes()
        if current != data:
            raise UserError(f"{store.path.name} changed while repairing it; run repair again.")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        backup = store.path.with_name(f"{store.path.name}.bak-{stamp}")
        n = 1
        while not confined.create(store.root, backup, data):  # never over anything
            n += 1
            backup = store.path.with_name(f"{store.path.name}.bak-{stamp}-{n}")
        written = confined.replace(store.root, store.path, result.data)
        remember(store.root, store.path.name, result.data, written)
    return RepairOutcome(
        True, str(backup), result.fixed_lines, result.unrepaired_lines, result.guessed_lines
    )


def refresh_refs(ws: Workspace, key: str, accept: list[str] | None = None) -> Refreshed:
    """Record the current content of an entry's code references as its new baseline.

    For after a ``stale_ref``: once the entry has been brought up to date with the code, this
    makes the code as it is now the new baseline — for a reference whose lines changed only
    when it is named in ``accept`` and its lines hold what it cited. Returns the entry id, the
    anchors recorded and the references that could not be (with why).
    """
    from journal_agent.journal.reffix import refresh

    return refresh(ws.root, key, accept)


def fix_refs(ws: Workspace) -> FixOutcome:
    """Rewrite the references whose lines moved to where they are now (``check --fix``)."""
    from journal_agent.journal.reffix import fix_moved

    return fix_moved(ws.root)
