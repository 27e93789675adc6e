"""The state of one code reference of an entry, as the view shows it beside the link.

- ``fresh``: the lines hash as they did when the entry was appended;
- ``moved``: those exact lines are now elsewhere in the file (the link goes there);
- ``changed``: the lines differ and are nowhere else in the file (``journal check`` says
  ``stale_ref``);
- ``gone``: no such file, lines past its end, or a path outside the workspace;
- ``unrecorded``: the lines exist but no hash was recorded (an entry written by hand).

The hashes and the checks are the journal's own (:mod:`journal_agent.journal.refs`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from journal_agent.journal.refs import CodeRef, FileCache, content_hash, resolve_problem

_MOVE_SEARCH_LINES = 20_000  # a file longer than this is not searched for moved lines


@dataclass(frozen=True)
class RefState:
    ref: CodeRef
    state: str  # fresh | moved | changed | gone | unrecorded
    detail: str
    start: int  # the lines to show (moved: where they are now)
    end: int

    @property
    def fragment(self) -> str:
        return f"L{self.start}" if self.start == self.end else f"L{self.start}-{self.end}"


def ref_state(ref: CodeRef, files: FileCache, recorded: dict[str, str]) -> RefState:
    why = resolve_problem(ref, files)
    if why is not None:
        return RefState(ref, "gone", why, ref.start, ref.end)
    old = recorded.get(ref.key)
    if old is None:
        return RefState(ref, "unrecorded", "no hash was recorded for it", ref.start, ref.end)
    if old == content_hash(ref, files):
        return RefState(ref, "fresh", "unchanged since the entry was written", ref.start, ref.end)
    moved = _find_lines(files.lines(ref.path) or [], ref.end - ref.start + 1, old)
    if moved is not None:
        end = moved + ref.end - ref.start
        where = f"line {moved}" if moved == end else f"lines {moved}-{end}"
        return RefState(ref, "moved", f"the same lines are now at {where}", moved, end)
    return RefState(
        ref, "changed", "the lines changed since the entry was written", ref.start, ref.end
    )


def _find_lines(lines: list[bytes], count: int, digest: str) -> int | None:
    """The first 1-based line where ``count`` lines hash to ``digest`` (as content_hash does)."""
    if count < 1 or len(lines) > _MOVE_SEARCH_LINES:
        return None
    for i in range(len(lines) - count + 1):
        if hashlib.sha256(b"\n".join(lines[i : i + count])).hexdigest()[:16] == digest:
            return i + 1
    return None
