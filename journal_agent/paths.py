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


def transcripts_dir(root: Path) -> Path:
    return state_dir(root) / "transcripts"


def runs_dir(root: Path) -> Path:
    return state_dir(root) / "runs"


def plugin_root() -> Path:
    """The directory holding the bundled ``agents/``, ``commands/`` and ``.claude-plugin/``.

    In a source checkout (or an editable install) that is the repository root; in a wheel the
    same files are shipped as package data under ``journal_agent/_plugin``.
    """
    packaged = Path(__file__).resolve().parent / "_plugin"
    if (packaged / "agents").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent
