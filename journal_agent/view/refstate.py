"""The state of one code reference of an entry, as the view shows it beside the link.

- ``fresh``: the lines hash as they did when the entry was appended;
- ``moved``: those exact lines are now elsewhere, in this file or another (the link goes there);
- ``changed``: the lines differ and were not found elsewhere (``journal check`` says
  ``stale_ref``);
- ``gone``: no such file, lines past its end, or a path outside the workspace;
- ``unrecorded``: the lines exist but no anchor was recorded (an entry written by hand).

The anchors and the search are the journal's own (:mod:`journal_agent.journal.relocate`), so
the view and ``journal check`` always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from journal_agent.journal.refs import Anchor, CodeRef, FileCache
from journal_agent.journal.relocate import Relocator


@dataclass(frozen=True)
class RefState:
    ref: CodeRef  # moved to another file: the reference as it would be written now
    state: str  # fresh | moved | changed | gone | unrecorded
    detail: str
    start: int  # the lines to show (moved: where they are now)
    end: int

    @property
    def fragment(self) -> str:
        return f"L{self.start}" if self.start == self.end else f"L{self.start}-{self.end}"


def ref_state(ref: CodeRef, files: FileCache, recorded: dict[str, Anchor]) -> RefState:
    found = Relocator(files.root, files).locate(ref, recorded.get(ref.key))
    detail = {
        "fresh": "unchanged since the entry was written",
        "unrecorded": "no hash was recorded for it",
    }.get(found.state, found.detail)
    if found.state == "moved":
        shown = replace(ref, path=found.path) if found.path != ref.path else ref
        return RefState(shown, "moved", detail, found.start, found.end)
    return RefState(ref, found.state, detail, ref.start, ref.end)
