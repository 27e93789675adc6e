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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from journal_agent.journal.places import FileView, first_line, recorded_names, span
from journal_agent.journal.refs import (
    Anchor,
    CodeRef,
    FileCache,
    LineSpan,
    content_hash,
    decode_line,
    resolve_problem,
)

_SKIP_DIRS = frozenset(
    [".git", "node_modules", "__pycache__", "venv", ".venv", "build", "dist", "site-packages"]
)
_MAX_FILES = 20_000  # files looked at by one content search (a huge tree is not searched whole)
_MAX_FILE_BYTES = 2_000_000
_MAX_DIFF_LINES = 40
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
    # changed: (path, start, end) of what holds the cited lines now, when anything does
    likely: tuple[str, int, int] | None = None


class Relocator:
    """Locates references in one workspace; files, listings and git answers are read once."""

    def __init__(self, root: Path, files: FileCache | None = None) -> None:
        self.root = Path(root)
        self.files = files or FileCache(self.root)
        self._tree: list[str] | None = None
        self._renames: dict[str, dict[str, list[str]]] = {}

    def view(self, path: str) -> FileView | None:
        lines = self.files.lines(path)
        return None if lines is None else FileView(path, lines, self.files)

    def locate(self, ref: CodeRef, anchor: Anchor | None) -> Located:
        why = resolve_problem(ref, self.files)
        if anchor is None:
            if why is not None:
                return Located("gone", ref.path, ref.start, ref.end, why)
            return Located("unrecorded", ref.path, ref.start, ref.end, "no anchor was recorded")
        count = anchor.count or ref.end - ref.start + 1
        inside = self.files.resolve(ref.path) is not None
        here = self.view(ref.path) if inside else None
        if here is not None and why is None and content_hash(ref, self.files) == anchor.hash:
            same = self._same_place(here, ref, anchor, count)
            if same is not None:
                return same
        found: tuple[str, int] | None = None
        ambiguous: list[str] = []
        if here is not None:
            at, ambiguous = here.pick(anchor, count)
            found = (ref.path, at) if at is not None else None
        if found is None and inside and not (here is not None and _still_defined(here, anchor)):
            found = self._elsewhere(ref, anchor, count)
        if found is not None:
            path, at = found
            end = at + count - 1
            if (path, at) == (ref.path, ref.start):
                return Located("fresh", ref.path, ref.start, ref.end, "unchanged")
            where = span(at, end) if path == ref.path else f"{path} {span(at, end)}"
            return Located("moved", path, at, end, f"the same lines are now at {where}")
        if here is None:
            if inside:
                changed = self._changed_elsewhere(ref, anchor, count)
                if changed is not None:
                    return changed
            return Located("gone", ref.path, ref.start, ref.end, why or f"{ref.path} is gone")
        return self._changed(ref, anchor, here, count, ambiguous)

    def _same_place(
        self, here: FileView, ref: CodeRef, anchor: Anchor, count: int
    ) -> Located | None:
        """The lines hash as recorded at their place: fresh, unless that place is now in
        another definition (the cited one was deleted and a twin's lines took its numbers) or
        plain lines whose overload moved; None: look for them elsewhere."""
        want = recorded_names(anchor, ref.path)
        if want is not None and here.names(ref.start, count) != want:
            at, _ = here.pick(anchor, count)
            if at == ref.start:
                return Located("fresh", ref.path, ref.start, ref.end, "unchanged")
            return None
        at = here.better_place(ref.start, anchor, count)
        if at is None:
            return Located("fresh", ref.path, ref.start, ref.end, "unchanged")
        end = at + count - 1
        return Located("moved", ref.path, at, end, f"the same lines are now at {span(at, end)}")

    # -- changed: where the lines probably are now, and what changed -------------------------

    def _changed(
        self, ref: CodeRef, anchor: Anchor, here: FileView, count: int, ambiguous: list[str]
    ) -> Located:
        likely = here.likely(anchor, ref.start, count)
        want = recorded_names(anchor, ref.path)
        gone = bool(want) and not here.outline.defines(want)
        if gone:
            moved = self._changed_elsewhere(ref, anchor, count)
            if moved is not None:
                return moved
        if ambiguous:
            detail = (
                f"the recorded lines occur {len(ambiguous)} times in {ref.path} "
                f"({', '.join(ambiguous[:4])}) and what surrounds them does not tell which one "
                "is meant"
            )
        elif gone and want:
            owner = _name(here.names(ref.start, count))
            detail = f"{_name(want)}, whose lines the entry cites, is no longer in {ref.path}" + (
                f" (lines {ref.start}-{ref.end} are in {owner} now)"
                if owner and ref.end <= len(here.lines)
                else ""
            )
        elif likely is None:
            detail = f"the recorded lines are no longer in {ref.path}"
        elif likely != (ref.start, ref.end):
            detail = f"the lines changed; they are probably {span(*likely)} now"
        else:
            detail = CHANGED
        start, end = likely or (ref.start, ref.end)
        return Located(
            "changed",
            ref.path,
            start,
            end,
            detail,
            _diff(anchor, ref, ref.path, here.lines, likely),
            likely=(ref.path, *likely) if likely else None,
        )

    def _changed_elsewhere(self, ref: CodeRef, anchor: Anchor, count: int) -> Located | None:
        """The recorded definition, gone from its file, in exactly one other file, its lines
        changed there: where they probably are."""
        want = recorded_names(anchor, ref.path)
        if not want or not anchor.scope:
            return None
        places = []
        for path in self._candidates(ref, _definition_bytes(anchor)):
            view = self.view(path)
            if view is not None and view.definition(anchor) is not None:
                places.append(view)
        if len(places) != 1:
            return None
        view = places[0]
        likely = view.likely(anchor, 0, count)
        if likely is None:
            first, last = view.definition(anchor) or (0, 0)
            return Located(
                "changed",
                ref.path,
                ref.start,
                ref.end,
                f"{_name(want)} is now in {view.path} (lines {first}-{last}), and what the "
                "entry cited is no longer in it",
                _diff(anchor, ref, view.path, view.lines, None),
            )
        where = f"{view.path}:{likely[0]}" + (f"-{likely[1]}" if likely[1] != likely[0] else "")
        return Located(
            "changed",
            view.path,
            likely[0],
            likely[1],
            f"{_name(want)} is now in {view.path}, and the lines changed: they are probably "
            f"{where} now",
            _diff(anchor, ref, view.path, view.lines, likely),
            likely=(view.path, *likely),
        )

    # -- other files ------------------------------------------------------------------------

    def _elsewhere(self, ref: CodeRef, anchor: Anchor, count: int) -> tuple[str, int] | None:
        """The one other file holding the lines: where git says the file went, else a search
        of the workspace's files of the same kind (the lines must occur exactly once)."""
        for path in self._renamed(anchor.commit, ref.path):
            view = self.view(path)
            if view is not None:
                at, _ = view.pick(anchor, count)
                if at is not None:
                    return path, at
        first = first_line(anchor)
        want = recorded_names(anchor, ref.path)
        hits: list[tuple[str, int, int]] = []
        for path in self._candidates(ref, first):
            view = self.view(path)
            if view is None:
                continue
            for at in view.windows(anchor, count):
                if want is not None and view.names(at, count) != want:
                    continue  # in another definition: a twin, not the cited lines
                hits.append((path, at, min(view.context_sides(at, count, anchor))))
                if len(hits) > 8:
                    return None  # common lines: no single place
        if len(hits) != 1:
            return None
        path, at, sides = hits[0]
        if want:
            return path, at  # the cited definition left its file and is here, once
        # Across files lines with no definition around them must have taken their context
        # along, above and below: a copy that was elsewhere all along is not a move.
        return (path, at) if sides >= 1 else None

    def _candidates(self, ref: CodeRef, needle: bytes | None) -> list[str]:
        """The workspace's other files of the reference's kind that hold ``needle``."""
        suffix = Path(ref.path).suffix
        out = []
        for path in self._files():
            if path == ref.path or (suffix and not path.endswith(suffix)):
                continue
            if needle is not None and not self._contains(path, needle):
                continue
            out.append(path)
        return out

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


def _still_defined(here: FileView, anchor: Anchor) -> bool:
    """The recorded definition is still in the reference's file: its lines changed there, and
    a copy of them in another file is not where they went."""
    want = recorded_names(anchor, here.path)
    return bool(want) and bool(here.outline.defines(want))


def _name(names: tuple[bytes, ...]) -> str:
    """``Client.send`` for the chain (class Client, def send)."""
    parts = [n.rsplit(b" ", 1)[-1].decode("utf-8", "replace") for n in names]
    return f"`{'.'.join(parts)}`" if parts else ""


def _definition_bytes(anchor: Anchor) -> bytes | None:
    """The innermost recorded header line, to skip files cheaply."""
    if not anchor.scope:
        return None
    from journal_agent.secret_text import REDACTED

    line = anchor.scope[-1]
    return None if REDACTED in line or "\ufffd" in line else line.encode("utf-8")


def _diff(
    anchor: Anchor,
    ref: CodeRef,
    path: str,
    lines: Sequence[bytes],
    likely: tuple[int, int] | None,
) -> tuple[str, ...]:
    """The recorded lines against those that probably replaced them (all removed when no
    stretch of the file holds what was cited)."""
    if not anchor.text:
        return ()
    if likely is None:
        now: list[str] = []
        label, offset = f"{path} (no longer there)", 0
    else:
        start, end = likely
        now = [decode_line(x) for x in lines[start - 1 : end]]
        label, offset = f"{path}:{start}-{end} now", start - 1
    body = list(
        difflib.unified_diff(
            list(anchor.text), now, f"{ref.key} as recorded", label, n=1, lineterm=""
        )
    )
    body = [_shift_hunk(line, ref.start - 1, offset) for line in body]
    if len(body) > _MAX_DIFF_LINES:
        body = [*body[:_MAX_DIFF_LINES], f"… ({len(body) - _MAX_DIFF_LINES} more lines)"]
    return tuple(body)


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
