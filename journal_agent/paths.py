"""Where journal-agent keeps things inside the user's project (the workspace root)."""

from __future__ import annotations

from pathlib import Path

JOURNAL_FILE = "learning_journal.md"
LEDGER_FILE = "learning_ledger.md"
STATE_DIR = ".journal"


def state_dir(root: Path) -> Path:
    """``.journal/`` under the workspace root: ours, unlike the user's markdown files."""
    return root / STATE_DIR


def measurements_dir(root: Path) -> Path:
    return state_dir(root) / "measurements"


def records_dir_for_saving(root: Path) -> Path:
    """Where a new measurement record goes: inside the sandbox (where ``.journal/`` is
    read-only) the call's outbox, which the host saves from after the call
    (:mod:`journal_agent.tools.sandbox.call`); elsewhere :func:`measurements_dir`."""
    import os

    outbox = os.environ.get("JOURNAL_AGENT_OUTBOX")
    if outbox and Path(outbox).is_dir() and os.access(outbox, os.W_OK):
        return Path(outbox)
    return measurements_dir(root)


def transcripts_dir(root: Path) -> Path:
    return state_dir(root) / "transcripts"


def runs_dir(root: Path) -> Path:
    return state_dir(root) / "runs"


def drafts_dir(root: Path) -> Path:
    """Entry drafts: the agents' own, and those ``inbox draft`` writes for the user to accept."""
    return state_dir(root) / "drafts"


def draft_usage_path(root: Path) -> Path:
    """The tokens ``inbox draft`` spent each day: outside ``drafts/``, which agents may write."""
    return state_dir(root) / "draft-usage.json"


def refs_file(root: Path) -> Path:
    """The anchors of the journal's code references (append-only JSON lines)."""
    return state_dir(root) / "refs.jsonl"


def index_file(root: Path) -> Path:
    """The search index (SQLite), rebuilt from the markdown whenever it is missing."""
    return state_dir(root) / "index.sqlite"


def review_file(root: Path) -> Path:
    """Spaced review's cards and log."""
    return state_dir(root) / "review.json"


def plugin_root() -> Path:
    """The directory holding the bundled ``agents/``, ``commands/`` and ``.claude-plugin/``.

    In a source checkout (or an editable install) that is the repository root; in a wheel the
    same files are shipped as package data under ``journal_agent/_plugin``.
    """
    packaged = Path(__file__).resolve().parent / "_plugin"
    if (packaged / "agents").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent


def anchor_of(path: Path | str) -> Path:
    """The folder a file of ours is reached from (``journal_agent.confined``'s anchor): the
    workspace above the last ``.journal`` in ``path``, else the file's own folder (the journal
    and the ledger sit in the workspace itself)."""
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.name == STATE_DIR:
            return parent.parent
    return path.parent
