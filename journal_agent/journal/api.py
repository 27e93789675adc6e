"""What the CLI, the agent tools and the MCP server call: validate + append, check, search,
related entries, repair. No printing here; callers render."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from journal_agent.atomic import atomic_write
from journal_agent.errors import UserError
from journal_agent.journal.index import Hit, SearchIndex
from journal_agent.journal.model import Journal, parse_journal
from journal_agent.journal.refs import RefStore
from journal_agent.journal.store import JournalStore
from journal_agent.journal.verify import (
    CheckReport,
    DraftError,
    Problem,
    check_journal,
    ref_hashes,
    validate_draft,
)
from journal_agent.paths import JOURNAL_FILE
from journal_agent.secrets import refuse_secrets

logger = logging.getLogger(__name__)


@dataclass
class AppendOutcome:
    appended: bool
    entry_id: str | None = None
    line: int | None = None
    problems: list[Problem] = field(default_factory=list)
    forced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "appended": self.appended,
            "entry": self.entry_id,
            "line": self.line,
            "forced": self.forced,
            "problems": [p.to_dict() for p in self.problems],
        }


def append_entry(root: Path, text: str, force: bool = False) -> AppendOutcome:
    """Validate a draft entry and append it; problems reject it unless ``force``.

    Raises :class:`UserError` when the text is not one entry at all (nothing to force).
    """
    root = Path(root)
    text = text.removeprefix("\ufeff")  # editors on Windows save drafts with a BOM
    # Not even with force: a key in the journal would be copied into every backup and share.
    refuse_secrets(text, JOURNAL_FILE)
    try:
        entry, problems = validate_draft(root, text)
    except DraftError as exc:
        raise UserError(f"the entry was not appended: {exc}.") from None
    if problems and not force:
        return AppendOutcome(appended=False, entry_id=entry.id, problems=problems)
    store = JournalStore(root)
    result = _append_with_hashes(store, text, entry)
    outcome = AppendOutcome(True, result.entry_id, result.line, problems, forced=bool(problems))
    _log_append(store, outcome)
    # Keep search current without a rebuild; failures here must not undo the append.
    try:
        appended = parse_journal(result.text).entries[0]
        appended.id = result.entry_id
        appended.start_line = result.line
        SearchIndex(root).note_append(
            appended,
            (result.old_size, result.old_mtime_ns),
            (result.new_size, result.new_mtime_ns),
            store.path.read_bytes(),
        )
    except Exception as exc:
        # The next search rebuilds the index from the markdown; `--verbose` says why.
        logger.debug("search index not updated after appending %s: %r", result.entry_id, exc)
    return outcome


def _append_with_hashes(store: JournalStore, text: str, entry: Any) -> Any:
    hashes = ref_hashes(store.root, entry)
    refs = RefStore(store.state / "refs.jsonl")
    # Recorded under the journal lock, before the journal is replaced: a crash in between
    # leaves an unused key, never an entry whose hashes are missing.
    return store.append(
        text, before_write=(lambda eid: refs.record(eid, hashes)) if hashes else None
    )


def _log_append(store: JournalStore, outcome: AppendOutcome) -> None:
    """``.journal/appends.jsonl``: one line per append; forced appends keep their problems."""
    record = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        **outcome.to_dict(),
    }
    store.state.mkdir(parents=True, exist_ok=True)
    with open(store.state / "appends.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def check(root: Path) -> CheckReport:
    return check_journal(Path(root))


def load(root: Path) -> Journal:
    return JournalStore(Path(root)).load()


def search(root: Path, query: str, tags: list[str] | None = None, limit: int = 10) -> list[Hit]:
    _require_journal(root)
    return SearchIndex(Path(root)).search(query, tags, limit)


def related(root: Path, draft: str, limit: int = 5) -> list[Hit]:
    """Existing entries most similar to a draft (for its 🔗 Related Concepts section)."""
    if not (Path(root) / JOURNAL_FILE).is_file():
        return []
    exclude: set[str] = set()
    with contextlib.suppress(IndexError):
        exclude.add(parse_journal(draft).entries[0].id)
    JournalStore(Path(root)).read_text()  # fail clearly on a broken encoding
    return SearchIndex(Path(root)).related(draft, limit, exclude)


def _require_journal(root: Path) -> None:
    store = JournalStore(Path(root))
    if not store.exists():
        store.read_bytes()  # raises the "no journal yet" UserError


@dataclass
class RepairOutcome:
    changed: bool
    backup: str | None
    fixed_lines: list[int]
    unrepaired_lines: list[int]
    guessed_lines: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def repair(root: Path, dry_run: bool = False) -> RepairOutcome:
    """Fix invalid UTF-8 and double-encoded text, after writing ``<journal>.bak-<timestamp>``."""
    from journal_agent.journal.encoding import repair as repair_bytes

    store = JournalStore(Path(root))
    data = store.read_bytes()
    result = repair_bytes(data)
    if not result.changed or dry_run:
        return RepairOutcome(
            False, None, result.fixed_lines, result.unrepaired_lines, result.guessed_lines
        )
    with store._locked():
        current = store.path.read_bytes()
        if current != data:
            raise UserError(f"{store.path.name} changed while repairing it; run repair again.")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        backup = store.path.with_name(f"{store.path.name}.bak-{stamp}")
        n = 1
        while backup.exists():
            n += 1
            backup = store.path.with_name(f"{store.path.name}.bak-{stamp}-{n}")
        atomic_write(backup, data)
        atomic_write(store.path, result.data)
    return RepairOutcome(
        True, str(backup), result.fixed_lines, result.unrepaired_lines, result.guessed_lines
    )


def refresh_refs(root: Path, key: str) -> tuple[str, dict[str, str]]:
    """Record the current content hashes of an entry's code references.

    For after a ``stale_ref``: once the entry has been brought up to date with the code, this
    makes the code as it is now the new baseline. Returns the entry id and the hashes.
    """
    store = JournalStore(Path(root))
    with store._locked():
        journal = store.load()
        entry = journal.get(key)
        if entry is None:
            raise UserError(
                f"no single entry matches {key!r}; use an id or number from "
                "`journal-agent journal list`."
            )
        hashes = ref_hashes(store.root, entry)
        RefStore(store.state / "refs.jsonl").record(entry.id, hashes)
    return entry.id, hashes
