"""Which measurement records are cited, and by what: what ``measurements --unreferenced`` lists
and ``measurements prune`` may delete.

A record counts as referenced when its id appears in the journal, the ledger, a moment of the
inbox, a draft waiting under ``.journal/drafts/``, or another record (a measured run names the
trace it was compared with): anything that could cite it later keeps it.

Every file is read through :mod:`journal_agent.confined`, line by line (a 100 MB journal is
never held whole). A citing file that is not plain (a link, a FIFO) is :class:`Refused`, never
skipped: prune must not take "could not read the journal" for "nothing cites this record".
Drafts and other records are the exception: something untrusted may write them, and one that
is odd is ignored there as everywhere else.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from journal_agent import confined
from journal_agent.paths import drafts_dir, measurements_dir

_ID = re.compile(rb"\b(?:est|trace|meas)-[0-9a-f]{8}\b")
_PLANTED_LIMIT = 16 << 20  # a draft or a record bigger than this is not one of ours


@dataclass(frozen=True)
class Pruned:
    deleted: list[str]
    kept: int  # referenced records left in place


def citing(root: Path) -> dict[str, set[str]]:
    """``{record id: {what cites it}}`` ("learning_journal.md", "learning_ledger.md",
    "inbox", "drafts/<name>", "record <id>")."""
    root = Path(root)
    found: dict[str, set[str]] = defaultdict(set)
    for name, shown in (
        ("learning_journal.md", "learning_journal.md"),
        ("learning_ledger.md", "learning_ledger.md"),
        (".journal/inbox.jsonl", "inbox"),
    ):
        for record_id in _streamed_ids(root, name):
            found[record_id].add(shown)
    for name in _names(root, drafts_dir(root), ".md"):
        for record_id in _planted_ids(root, drafts_dir(root) / name):
            found[record_id].add(f"drafts/{name}")
    records = measurements_dir(root)
    for name in _names(root, records, ".json"):
        stem = name.removesuffix(".json")
        for record_id in _planted_ids(root, records / name) - {stem}:
            found[record_id].add(f"record {stem}")
    return dict(found)


def _streamed_ids(root: Path, name: str) -> set[str]:
    f = confined.open_read(root, name, one_name=False)  # only read: a hard link is fine
    if f is None:
        return set()
    with f:
        return {m.decode() for line in f for m in _ID.findall(line)}


def _planted_ids(root: Path, path: Path) -> set[str]:
    data = confined.read_planted(root, path, _PLANTED_LIMIT, one_name=False)
    return set() if data is None else {m.decode() for m in _ID.findall(data)}


def _names(root: Path, folder: Path, suffix: str) -> list[str]:
    try:
        return [n for n in confined.listdir(root, folder) if n.endswith(suffix)]
    except confined.Refused:
        return []  # a linked drafts or records folder holds nothing of ours


def unreferenced(root: Path, ids: list[str]) -> list[str]:
    """The ``ids`` nothing cites."""
    cited = citing(root)
    return [record_id for record_id in ids if record_id not in cited]


def prune(root: Path, ids: list[str]) -> Pruned:
    """Delete the records of ``ids`` that nothing cites (checked again now: one cited since
    it was listed is kept). Only a plain file is removed; a link of that name is left."""
    root = Path(root)
    records = measurements_dir(root)
    gone = unreferenced(root, ids)
    deleted = []
    for record_id in gone:
        path = records / f"{record_id}.json"
        if confined.problem(root, path) is not None or confined.lstat(root, path) is None:
            continue
        if confined.unlink(root, path):
            deleted.append(record_id)
    return Pruned(deleted, len(ids) - len(gone))
