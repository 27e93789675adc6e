"""``doctor``'s survey of the files of ours: every oddity under ``.journal/`` and at the journal's
and the ledger's names, each with the one command that fixes it.

What :mod:`journal_agent.confined` refuses when it meets it — a symlink (committed by a cloned
repository, or planted by a command), a FIFO, socket or device, a folder where a file of ours
belongs, a file with more than one name (a hard link) — is named here before anything trips
on it, in the room's own sentence. Nothing is opened: names are looked at with ``lstat``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal_agent import confined
from journal_agent.check import Check
from journal_agent.paths import JOURNAL_FILE, LEDGER_FILE, STATE_DIR

if TYPE_CHECKING:
    from pathlib import Path

# Names under .journal/ that are files of ours: a folder there is an oddity too.
FILES = (
    "inbox.jsonl",
    "refs.jsonl",
    "appends.jsonl",
    "review.json",
    "hooks.log",
    "index.sqlite",
    "titles.tsv",
    "vectors.sqlite",
    "journal.lock",
    "journal.state.json",
    "tool-reads.json",
    "draft-usage.json",
    "approved-tools.json",
    "settings.json",
    "capture/status.json",
    "capture/due.json",
    "capture/recall.jsonl",
    "capture/refs-by-file.idx",
    "history/feedback.jsonl",
    "written.json",
    "written-review.json",
    "written-inbox.json",
    "written-inbox.jsonl",
)


def oddities(root: Path) -> list[str]:
    """One sentence per oddity: the journal and ledger, then everything under ``.journal/``."""
    found: list[str] = []
    for name in (JOURNAL_FILE, LEDGER_FILE, *(f"{STATE_DIR}/{f}" for f in FILES)):
        said = confined.problem(root, name)
        if said is not None:
            found.append(said)
    for _, said in confined.walk_files(root, STATE_DIR):
        if said is not None and said not in found:
            found.append(said)
    return found


NAME = "journal files"
SHOWN = 20  # oddities named one by one; the rest are counted


def own_files_checks(root: Path) -> list[Check]:
    """A failing check per oddity (at most :data:`SHOWN`), each in the sentence that names its
    fix; or one passing check."""
    found = oddities(root)
    if not found:
        plain = "hold plain files only (no link, FIFO or hard link)"
        return [Check(NAME, True, f"{JOURNAL_FILE}, {LEDGER_FILE} and {STATE_DIR}/ {plain}")]
    checks = [Check(NAME, False, said) for said in found[:SHOWN]]
    if len(found) > SHOWN:
        checks.append(Check(NAME, False, f"and {len(found) - SHOWN} more like these"))
    return checks
