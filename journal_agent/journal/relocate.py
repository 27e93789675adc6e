"""Finding a reference's lines again after the code was edited.

Each reference keeps an :class:`~journal_agent.journal.refs.Anchor` (the lines' hash, the lines,
a little context, the commit). :class:`Relocator` says where those lines are now:

- ``fresh``: the same lines at the same place;
- ``moved``: the same lines elsewhere — further down the file, or in another file (git's rename
  detection when the anchor has a commit, then a search of the workspace's files of the same
  kind) — with the new place;
- ``changed``: not found as they were; the lines that are there now, probably (between the
  recorded context, else at the old line numbers), and a diff against the recorded ones;
- ``gone``: the file is gone (or outside the workspace) and the lines are nowhere else;
- ``unrecorded``: nothing was recorded for it (an entry written by hand).

A move is reported only when the place is certain: the lines occur exactly once where we look,
or once with more of the recorded context around them than anywhere else; short or repeated
lines need their context to agree. Anything less is reported as changed, never as moved.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from journal_agent.journal.refs import (
    Anchor,
    CodeRef,
    FileCache,
    LineSpan,
    content_hash,
    decode_line,
    resolve_problem,
    window_hash,
)

_SKIP_DIRS = frozenset(
    [".git", "node_modules", "__pycache__", "venv", ".venv", "build", "dist", "site-packages"]
)
_MAX_FILES = 20_000  # files looked at by one content search (a huge tree is not searched whole)
_MAX_FILE_BYTES = 2_000_000
_MAX_DIFF_LINES = 40
_SUBSTANTIVE = 4  # characters (stripped) for a line to count as telling, unlike "}" or ")"
_GIT_TIMEOUT_S = 10.0
CHANGED = "the lines changed since the entry was written"


@dataclass(frozen=True)
class Located(LineSpan):
    state: str  # fresh | moved | changed | gone | unrecorded
    path: str  # where the lines are now (moved), else the reference's own path
    start: int
    end: int
    detail: str
    diff: tuple[str, ...] = field(default=())


def _span(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}-{end}"


class Relocator:
    """Locates references in one workspace; files, listings and git answers are read once."""

    def __init__(self, root: Path, files: FileCache | None = None) -> None:
        self.root = Path(root)
        self.files = files or FileCache(self.root)
        self._tree: list[str] | None = None
        self._renames: dict[str, dict[str, list[str]]] = {}

    def locate(self, ref: CodeRef, anchor: Anchor | None) -> Located:
        why = resolve_problem(ref, self.files)
        if anchor is None:
            if why is not None:
                return Located("gone", ref.path, ref.start, ref.end, why)
            return Located("unrecorded", ref.path, ref.start, ref.end, "no anchor was recorded")
        count = anchor.count or ref.end - ref.start + 1
        inside = self.files.resolve(ref.path) is not None
        lines = self.files.lines(ref.path) if inside else None
        if why is None and content_hash(ref, self.files) == anchor.hash:
            at = _better_place(lines or [], ref.start, anchor, count)
            if at is None:
                return Located("fresh", ref.path, ref.start, ref.end, "unchanged")
            end = at + count - 1
            return Located(
                "moved", ref.path, at, end, f"the same lines are now at {_span(at, end)}"
            )
        found: tuple[str, int] | None = None
        ambiguous: list[str] = []
        if lines is not None:
            at, ambiguous = _pick(lines, anchor, count)
            found = (ref.path, at) if at is not None else None
        if found is None and inside:
            found = self._elsewhere(ref, anchor, count)
        if found is not None:
            path, at = found
            end = at + count - 1
            where = _span(at, end) if path == ref.path else f"{path} {_span(at, end)}"
            return Located("moved", path, at, end, f"the same lines are now at {where}")
        if lines is None:
            return Located("gone", ref.path, ref.start, ref.end, why or f"{ref.path} is gone")
        return self._changed(ref, anchor, lines, count, ambiguous)

    # -- changed: where the lines probably are now, and what changed -------------------------

    def _changed(
        self, ref: CodeRef, anchor: Anchor, lines: list[bytes], count: int, ambiguous: list[str]
    ) -> Located:
        start, end = _region(lines, anchor, ref, count)
        now = [decode_line(x) for x in lines[start - 1 : end]]
        diff: tuple[str, ...] = ()
        if anchor.text:
            body = list(
                difflib.unified_diff(
                    list(anchor.text),
                    now,
                    f"{ref.key} as recorded",
                    f"{ref.path}:{start}-{end} now" if end >= start else f"{ref.path} now",
                    n=1,
                    lineterm="",
                )
            )
            body = [_shift_hunk(line, ref.start - 1, start - 1) for line in body]
            if len(body) > _MAX_DIFF_LINES:
                body = [*body[:_MAX_DIFF_LINES], f"… ({len(body) - _MAX_DIFF_LINES} more lines)"]
            diff = tuple(body)
        if ambiguous:
            detail = (
                f"the recorded lines occur {len(ambiguous)} times in {ref.path} "
                f"({', '.join(ambiguous[:4])}) and their context does not tell which one is meant"
            )
        elif end < start:
            detail = f"the recorded lines are no longer in {ref.path}"
        elif (start, end) != (ref.start, ref.end):
            detail = f"the lines changed; they are probably {_span(start, end)} now"
        else:
            detail = CHANGED
        return Located("changed", ref.path, start, end, detail, diff)

    # -- other files ------------------------------------------------------------------------

    def _elsewhere(self, ref: CodeRef, anchor: Anchor, count: int) -> tuple[str, int] | None:
        """The one other file holding the lines: where git says the file went, else a search
        of the workspace's files of the same kind (the lines must occur exactly once)."""
        for path in self._renamed(anchor.commit, ref.path):
            lines = self.files.lines(path)
            if lines is not None:
                at, _ = _pick(lines, anchor, count)
                if at is not None:
                    return path, at
        first = _first_line(anchor)
        suffix = Path(ref.path).suffix
        hits: list[tuple[str, int, int]] = []
        for path in self._files():
            if path == ref.path or (suffix and not path.endswith(suffix)):
                continue
            if first is not None and not self._contains(path, first):
                continue
            lines = self.files.lines(path) or []
            for at in _windows(lines, anchor, count, first):
                hits.append((path, at, min(_context_sides(lines, at, count, anchor))))
                if len(hits) > 8:
                    return None  # common lines: no single place
        # Across files the lines must have taken their context along, above and below: a copy
        # that was elsewhere all along (and stayed when the original changed) is not a move.
        if len(hits) != 1 or hits[0][2] < 1:
            return None
        return hits[0][0], hits[0][1]

    def _contains(self, path: str, needle: bytes) -> bool:
        full = self.files.resolve(path)
        try:
            if full is None or full.stat().st_size > _MAX_FILE_BYTES:
                return False
            return needle in full.read_bytes()
        except OSError:
            return False

    def _files(self) -> list[str]:
        if self._tree is None:
            self._tree = []
            for top, dirs, names in os.walk(self.root):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for name in sorted(names):
                    rel = os.path.relpath(os.path.join(top, name), self.root)
                    self._tree.append(rel.replace(os.sep, "/"))
                if len(self._tree) > _MAX_FILES:
                    break
        return self._tree

    def _renamed(self, commit: str | None, path: str) -> list[str]:
        """Where git's rename detection says ``path`` went since ``commit`` (working tree)."""
        if not commit:
            return []
        if commit not in self._renames:
            self._renames[commit] = _git_renames(self.root, commit)
        return self._renames[commit].get(path, [])


_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _shift_hunk(line: str, old_offset: int, new_offset: int) -> str:
    """A hunk header with the file's line numbers (difflib counts from the cited lines)."""
    m = _HUNK.match(line)
    if m is None:
        return line
    old = int(m.group(1)) + old_offset
    new = int(m.group(3)) + new_offset
    return f"@@ -{old}{m.group(2) or ''} +{new}{m.group(4) or ''} @@" + line[m.end() :]


def _git_renames(root: Path, commit: str) -> dict[str, list[str]]:
    from journal_agent.gitcmd import run_git

    prefix = run_git("rev-parse", "--show-prefix", cwd=root, timeout=_GIT_TIMEOUT_S)
    done = run_git(
        "diff", "-M", "--name-status", "-z", commit, "--", ".", cwd=root, timeout=_GIT_TIMEOUT_S
    )
    if prefix is None or done is None or prefix.returncode or done.returncode:
        return {}
    base = prefix.stdout.decode("utf-8", "replace").strip()
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status[:1] in ("R", "C") and i + 2 < len(fields):
            old, new = fields[i + 1], fields[i + 2]
            if old.startswith(base) and new.startswith(base):
                out.setdefault(old[len(base) :], []).append(new[len(base) :])
            i += 3
        else:
            i += 2
    return out


# -- matching windows ------------------------------------------------------------------------


def _first_line(anchor: Anchor) -> bytes | None:
    """The first recorded line as bytes, to skip places cheaply (None: it was altered when
    recorded — redacted or not UTF-8 — so every place is hashed)."""
    from journal_agent.secret_text import REDACTED

    if not anchor.text or "\ufffd" in anchor.text[0] or REDACTED in anchor.text[0]:
        return None
    return anchor.text[0].encode("utf-8")


def _windows(lines: list[bytes], anchor: Anchor, count: int, first: bytes | None) -> list[int]:
    """1-based starts of every ``count`` lines that hash to the anchor."""
    out = []
    for i in range(len(lines) - count + 1):
        if first is not None and lines[i].rstrip(b"\r") != first:
            continue
        if window_hash(lines[i : i + count]) == anchor.hash:
            out.append(i + 1)
    return out


def _context_score(lines: list[bytes], at: int, count: int, anchor: Anchor) -> int:
    return sum(_context_sides(lines, at, count, anchor))


def _context_sides(lines: list[bytes], at: int, count: int, anchor: Anchor) -> tuple[int, int]:
    """How many telling lines of the recorded context surround a place, above and below,
    counted outward from it and only up to the first line that differs: a lone match further
    off (another ``def command(`` three lines up) is a coincidence, not context."""
    above = below = 0
    for k, want in enumerate(reversed(anchor.before), start=1):
        i = at - 1 - k
        if i < 0 or decode_line(lines[i]) != want:
            break
        above += len(want.strip()) >= _SUBSTANTIVE
    for k, want in enumerate(anchor.after):
        i = at - 1 + count + k
        if i >= len(lines) or decode_line(lines[i]) != want:
            break
        below += len(want.strip()) >= _SUBSTANTIVE
    return above, below


def _substantive(anchor: Anchor, lines: list[bytes], at: int, count: int) -> int:
    window = lines[at - 1 : at - 1 + count]
    return len({x.strip() for x in window if len(x.strip()) >= _SUBSTANTIVE})


def _pick(lines: list[bytes], anchor: Anchor, count: int) -> tuple[int | None, list[str]]:
    """The place in one file, when certain; else None and the places it could be."""
    places = _windows(lines, anchor, count, _first_line(anchor))
    if not places:
        return None, []
    scores = [_context_score(lines, at, count, anchor) for at in places]
    best = max(scores)
    if len(places) == 1:
        strong = _substantive(anchor, lines, places[0], count) >= 3
        return (places[0], []) if best >= 1 or strong else (None, [])
    if best >= 1 and scores.count(best) == 1:
        return places[scores.index(best)], []
    return None, [_span(at, at + count - 1) for at in places]


def _better_place(lines: list[bytes], start: int, anchor: Anchor, count: int) -> int | None:
    """For lines that still hash as recorded at their place: another place, when these lines
    are too plain to tell apart (``...``, ``return None``), none of the recorded context is
    around them any more, and it is all around one other place (an overload that moved)."""
    if _substantive(anchor, lines, start, count) >= 3 or _context_score(
        lines, start, count, anchor
    ):
        return None
    if not any(len(x.strip()) >= _SUBSTANTIVE for x in (*anchor.before, *anchor.after)):
        return None
    at, _ = _pick(lines, anchor, count)
    return at if at is not None and at != start else None


def _region(lines: list[bytes], anchor: Anchor, ref: CodeRef, count: int) -> tuple[int, int]:
    """Where the recorded lines probably are now (1-based, inclusive; end < start: nothing):
    between the recorded context when it is found once, else at the old line numbers."""
    text = [decode_line(x) for x in lines]
    start = _after_block(text, anchor.before)
    end = _before_block(text, anchor.after)
    if start is not None and end is not None and start <= end + 1 and end - start < 3 * count + 10:
        return start, end
    if start is not None:
        return start, min(len(text), start + count - 1)
    if end is not None:
        return max(1, end - count + 1), end
    first = min(ref.start, len(text) + 1)
    return first, min(len(text), first + count - 1)


def _after_block(text: list[str], block: tuple[str, ...]) -> int | None:
    """The 1-based line just after the one place ``block`` occurs (if it tells anything)."""
    if not any(len(x.strip()) >= _SUBSTANTIVE for x in block):
        return None
    n = len(block)
    places = [i for i in range(len(text) - n + 1) if tuple(text[i : i + n]) == block]
    return places[0] + n + 1 if len(places) == 1 else None


def _before_block(text: list[str], block: tuple[str, ...]) -> int | None:
    """The 1-based line just before the one place ``block`` occurs."""
    if not any(len(x.strip()) >= _SUBSTANTIVE for x in block):
        return None
    n = len(block)
    places = [i for i in range(len(text) - n + 1) if tuple(text[i : i + n]) == block]
    return places[0] if len(places) == 1 else None
