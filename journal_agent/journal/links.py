"""Links between entries: what a 🔗 Related Concepts section points at, and backlinks.

An entry links to another when its 🔗 section names the other's id or its title (as the agents
write it, ``**Title** (YYYY-MM-DD)``, or in plain words; case and spacing do not matter).
Computed from the markdown on demand: there is nothing to keep in sync.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from journal_agent.journal.model import Entry


def links_to(source: Entry, target: Entry) -> bool:
    section = source.section_text("related")
    if not section or source is target:
        return False
    if target.id and re.search(rf"(?<![\w-]){re.escape(target.id)}(?![\w-])", section):
        return True
    words = target.title.split()
    if not words:
        return False
    # The title's words in order, any whitespace or emphasis between them, whole words only.
    pattern = r"[\s*_`]+".join(re.escape(w) for w in words)
    return re.search(rf"(?<!\w){pattern}(?!\w)", section, re.IGNORECASE) is not None


def backlinks(entries: Iterable[Entry], target: Entry) -> list[Entry]:
    """The entries (a journal's, in order, read at once or one at a time) whose 🔗 Related
    Concepts section links to ``target`` (itself excepted: ids are unique in a journal)."""
    return [e for e in entries if e.id != target.id and links_to(e, target)]
