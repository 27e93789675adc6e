"""What the pages show, read from the workspace: the journal (parsed once per change of the
file), entries with their references' states, backlinks and related entries, the code a
reference cites. Shared by the server and the static export; nothing here renders HTML.

Every page has a path relative to the site's root (``index.html``, ``entries/<id>.html``,
``code/<path>.html``, ``records/<id>.html``); links are made relative to the page holding
them, so the same pages work from the server and from ``file://``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from journal_agent.journal.links import links_to
from journal_agent.journal.model import Entry, Journal
from journal_agent.journal.refs import Anchor, CodeRef, FileCache, RefStore
from journal_agent.paths import JOURNAL_FILE, LEDGER_FILE, measurements_dir, state_dir
from journal_agent.view.files import WorkspaceFiles
from journal_agent.view.refstate import RefState, ref_state

logger = logging.getLogger(__name__)

PAGE_SIZE = 200  # entries per journal page
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}$")
_ALNUM = re.compile(r"[^\W_]+")


def entry_name(entry_id: str) -> str:
    """The file name of an entry's page: its id, or for an id that is not a plain file name
    (a hand-written ``<!-- entry: a/../b -->``) a hash of it, never a path."""
    if _SAFE_NAME.match(entry_id):
        return entry_id
    return "_" + hashlib.sha256(entry_id.encode()).hexdigest()[:16]


def entry_path(entry_id: str) -> str:
    return f"entries/{entry_name(entry_id)}.html"


def code_path(rel: str) -> str:
    return "code/" + "/".join(quote(part) for part in rel.split("/")) + ".html"


def record_path(record_id: str) -> str:
    return f"records/{record_id}.html"


def tag_path(tag: str) -> str:
    return f"tags/{quote(tag, safe='')}.html"


def relative(from_page: str, target: str) -> str:
    """``target`` (a site path) as a link from the page at ``from_page``."""
    return "../" * from_page.count("/") + target


@dataclass
class _Parsed:
    journal: Journal
    by_id: dict[str, Entry]
    by_name: dict[str, Entry]
    newest_first: list[Entry]
    tags: Counter[str]
    derived: dict[str, Any] = field(default_factory=dict)


class Site:
    """One workspace's pages' data; safe to share between the server's threads."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.files = WorkspaceFiles(self.root)
        self._lock = threading.Lock()
        self._key: tuple[int, int] | None = None
        self._parsed: _Parsed | None = None
        self._hashes: tuple[tuple[int, int], dict[str, dict[str, Anchor]]] | None = None

    # -- what changed ---------------------------------------------------------------------

    def watched(self) -> list[Path]:
        state = state_dir(self.root)
        return [
            self.root / JOURNAL_FILE,
            self.root / LEDGER_FILE,
            state / "refs.jsonl",
            state / "review.json",
            measurements_dir(self.root),
            state / "inbox.jsonl",
        ]

    def stamp(self) -> str:
        """Changes whenever a file a page shows changes (size and mtime, no reading)."""
        parts = []
        for path in self.watched():
            try:
                st = path.stat()
                parts.append(f"{st.st_size}.{st.st_mtime_ns}")
            except OSError:
                parts.append("-")
        return "/".join(parts)

    # -- the journal ----------------------------------------------------------------------

    def parsed(self) -> _Parsed:
        from journal_agent.journal.store import JournalStore

        path = self.root / JOURNAL_FILE
        try:
            st = path.stat()
            key = (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            key = (-1, 0)
        with self._lock:
            if self._parsed is None or key != self._key:
                journal = JournalStore(self.root).load() if key[0] >= 0 else Journal("")
                entries = journal.entries
                newest = sorted(entries, key=lambda e: e.date, reverse=True)
                self._parsed = _Parsed(
                    journal,
                    {e.id: e for e in entries},
                    {entry_name(e.id): e for e in entries},
                    newest,
                    Counter(t for e in entries for t in e.tags),
                )
                self._key = key
            return self._parsed

    def entry(self, entry_id: str) -> Entry | None:
        return self.parsed().by_id.get(entry_id)

    def entry_named(self, name: str) -> Entry | None:
        """The entry whose page is ``entries/<name>.html``."""
        return self.parsed().by_name.get(name)

    def page_of_entries(self, page: int) -> tuple[list[Entry], int]:
        """The entries of one journal page, newest first, and the number of pages."""
        newest = self.parsed().newest_first
        pages = max(1, -(-len(newest) // PAGE_SIZE))
        return newest[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], pages

    def tagged(self, tag: str) -> list[Entry]:
        return [e for e in self.parsed().newest_first if tag in e.tags]

    def backlinks(self, entry: Entry) -> list[Entry]:
        """Entries whose 🔗 section links to ``entry`` (the journal's own ``links_to``)."""
        links = self._derived("backlinks", self._backlink_map)
        return links.get(entry.id, [])

    def _backlink_map(self, parsed: _Parsed) -> dict[str, list[Entry]]:
        """All backlinks at once: a target is a candidate for a source only when the first
        word of its title or id is a word of the source's 🔗 section; ``links_to`` decides."""
        by_word: dict[str, list[Entry]] = defaultdict(list)
        for target in parsed.journal.entries:
            for text in {target.title, target.id}:
                first = _ALNUM.search(text)
                if first:
                    by_word[first.group().lower()].append(target)
        out: dict[str, list[Entry]] = defaultdict(list)
        for source in parsed.journal.entries:
            section = source.section_text("related")
            if not section:
                continue
            words = {w.lower() for w in _ALNUM.findall(section)}
            seen: set[int] = set()
            for word in words:
                for target in by_word.get(word, ()):
                    if id(target) not in seen and links_to(source, target):
                        seen.add(id(target))
                        out[target.id].append(source)
        return out

    def _derived(self, name: str, build: Any) -> Any:
        parsed = self.parsed()
        with self._lock:
            if name not in parsed.derived:
                parsed.derived[name] = build(parsed)
            return parsed.derived[name]

    def related(self, entry: Entry, limit: int = 5) -> list[Any]:
        """Entries like this one (the search index's ``related``); [] when it cannot say."""
        from journal_agent.journal.search.index import SearchIndex

        try:
            return SearchIndex(self.root).related(entry.raw, limit, {entry.id})
        except Exception as exc:  # a broken index must not break the page
            logger.debug("related entries of %s not shown: %r", entry.id, exc)
            return []

    # -- references -----------------------------------------------------------------------

    def recorded_hashes(self) -> dict[str, dict[str, Anchor]]:
        """``.journal/refs.jsonl``'s anchors, read again only when it changed."""
        path = state_dir(self.root) / "refs.jsonl"
        try:
            st = path.stat()
            key: tuple[int, int] = (st.st_size, st.st_mtime_ns)
        except OSError:
            key = (-1, 0)
        with self._lock:
            if self._hashes is None or self._hashes[0] != key:
                self._hashes = (key, RefStore(path).anchors())
            return self._hashes[1]

    def ref_states(
        self, entry: Entry, recorded: dict[str, dict[str, Anchor]], files: FileCache | None = None
    ) -> list[RefState]:
        """Each reference's state; ``files`` may be shared by calls that see the same files
        (an export), else the files are read afresh."""
        files = files or FileCache(self.root)
        mine = recorded.get(entry.id, {})
        return [ref_state(ref, files, mine) for ref in entry.refs]

    def ref_target(self, ref: CodeRef) -> str | None:
        """The workspace-relative path a reference's link opens, or None (refused, missing)."""
        return self.files.readable(ref.path)

    def citing(self, rel: str) -> list[tuple[Entry, RefState]]:
        """Every entry's references into the file ``rel``, with their states."""
        recorded = self.recorded_hashes()
        out = []
        for entry in self.parsed().journal.entries:
            if not any(rel in ref.path for ref in entry.refs):
                continue
            for state in self.ref_states(entry, recorded):
                if self.files.readable(state.ref.path) == rel:
                    out.append((entry, state))
        return out
