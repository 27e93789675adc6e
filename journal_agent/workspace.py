"""The workspace: the user's project root and the stores kept in it, handed out on first use.

One :class:`Workspace` is built where a command, the MCP server, the view or a run starts
(``Workspace.at(root)``) and carried from there through the rooms — the CLI's commands, the
tools' context, the journal's and the ledger's front doors, the view — instead of a bare path
from which each room built its own store. A store is opened here, once, when first asked for.

Every store is a light object (paths, no open file or connection): each call reads the disk
afresh, so a long-lived workspace (the MCP server's, the view's) sees what other processes and
editors write. Settings are read on each call for the same reason. Nothing heavy is imported
until a store is asked for: a command that builds a workspace still starts fast.

A new store goes here as one more ``cached_property`` whose class takes its path from
:mod:`journal_agent.paths`; the store's module must never import this one (the layer test's
circle check holds that), so stores stay usable on their own, with a path, in tests and in the
hooks' standard-library-only modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent import paths

if TYPE_CHECKING:
    from journal_agent.capture.inbox import Inbox
    from journal_agent.journal.refs import RefStore
    from journal_agent.journal.search.index import SearchIndex
    from journal_agent.journal.store import JournalStore
    from journal_agent.learning.ledger_store import LedgerStore
    from journal_agent.learning.review_state import ReviewState
    from journal_agent.settings import Settings
    from profiling.records import RecordStore


@dataclass(frozen=True)
class Workspace:
    """The workspace at ``root`` (absolute) and its stores. Equal workspaces have equal roots."""

    root: Path

    @classmethod
    def at(cls, root: Path | str) -> Workspace:
        """The workspace at ``root``: ``~`` expanded, made absolute, symlinks resolved (the
        tools' confinement compares resolved paths)."""
        return cls(Path(root).expanduser().resolve())

    # -- where things are (journal_agent.paths) ------------------------------------------------
    @property
    def state(self) -> Path:
        """``.journal/``: ours, unlike the user's markdown files."""
        return paths.state_dir(self.root)

    @property
    def measurements(self) -> Path:
        return paths.measurements_dir(self.root)

    @property
    def transcripts(self) -> Path:
        return paths.transcripts_dir(self.root)

    @property
    def runs(self) -> Path:
        return paths.runs_dir(self.root)

    # -- the stores, opened on first use -------------------------------------------------------
    @cached_property
    def journal(self) -> JournalStore:
        """``learning_journal.md``: read, append under the journal's lock."""
        from journal_agent.journal.store import JournalStore

        return JournalStore(self.root)

    @cached_property
    def index(self) -> SearchIndex:
        """The search index over the journal (``.journal/index.sqlite``)."""
        from journal_agent.journal.search.index import SearchIndex

        return SearchIndex(self.root)

    @cached_property
    def refs(self) -> RefStore:
        """The anchors of the journal's code references (``.journal/refs.jsonl``)."""
        from journal_agent.journal.refs import RefStore

        return RefStore(paths.refs_file(self.root))

    @cached_property
    def ledger(self) -> LedgerStore:
        """``learning_ledger.md``: read, update under the journal's lock."""
        from journal_agent.learning.ledger_store import LedgerStore

        return LedgerStore(self.root)

    @cached_property
    def review(self) -> ReviewState:
        """Spaced review's cards and log (``.journal/review.json``)."""
        from journal_agent.learning.review_state import ReviewState

        return ReviewState(self.root)

    @cached_property
    def inbox(self) -> Inbox:
        """The learning moments the hooks captured (``.journal/inbox.jsonl``)."""
        from journal_agent.capture.inbox import Inbox

        return Inbox(self.root)

    @cached_property
    def records(self) -> RecordStore:
        """Measurement records (``.journal/measurements/``), which entries cite as ``[m:id]``."""
        from profiling.records import RecordStore

        return RecordStore(self.measurements)

    def settings(self) -> Settings:
        """The merged settings (``.journal/`` and ``.claude/`` files, then the user's), read
        now: a long-lived workspace sees the user's edits."""
        from journal_agent.settings import load_settings

        return load_settings(self.root)
