"""Code references (``path:line``, ``path:start-end``): extraction, resolution, content hashes.

When an entry is appended we record, per reference, an :class:`Anchor` in
``.journal/refs.jsonl`` (keyed by entry id and reference): a hash of the referenced lines, the
lines themselves and a little context around them, and the commit when the file is in git. So
``journal check`` can tell a reference whose lines only moved (found again elsewhere, by
:mod:`journal_agent.journal.relocate`) from one whose lines changed, and show the change.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False  # (typing is one more import for the hooks, which import this module)
if TYPE_CHECKING:
    from journal_agent.journal.scope import Outline

# A path with a slash, or a file name whose extension starts with a letter; then :N or :N-M.
_REF = re.compile(
    r"(?<![\w/.:@~-])"
    r"(?P<path>/?(?:[\w.-]+/)+[\w.-]*\w|[\w-][\w.-]*\.[A-Za-z]\w*)"
    r":(?P<start>\d{1,7})(?:[-–](?P<end>\d{1,7}))?(?![\w])"
)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# Outside backticks a bare ``name.ext:N`` must have a source-like extension, so that prose
# such as ``example.com:443`` is not taken for a reference.
_PLAIN_EXTENSIONS = frozenset(
    [
        "py",
        "pyi",
        "pyx",
        "pxd",
        "ipynb",
        "js",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "jsx",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "md",
        "rst",
        "txt",
        "sh",
        "bash",
        "zsh",
        "c",
        "h",
        "cc",
        "cpp",
        "cxx",
        "hpp",
        "hh",
        "cu",
        "cuh",
        "rs",
        "go",
        "java",
        "kt",
        "scala",
        "rb",
        "lua",
        "r",
        "jl",
        "swift",
        "m",
        "mm",
        "sql",
        "proto",
        "cmake",
        "mk",
        "gradle",
        "xml",
        "html",
        "css",
        "scss",
        "vue",
        "svelte",
        "tex",
        "csv",
        "tsv",
    ]
)


_SKIP_DIRS = frozenset(["node_modules", "__pycache__", "venv", "build", "dist", "site-packages"])


class LineSpan:
    """``path:start-end`` of a reference's lines: ``key`` as written (``path:N`` for one
    line), ``spec`` always as a range."""

    path: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.start}" if self.start == self.end else self.spec

    @property
    def spec(self) -> str:
        return f"{self.path}:{self.start}-{self.end}"


@dataclass(frozen=True)
class CodeRef(LineSpan):
    path: str
    start: int
    end: int
    line: int  # 1-based line in the document where the reference appears
    # Where the reference is written in that line (``path:N-M`` as typed), for rewriting it.
    span: tuple[int, int] = field(default=(-1, -1), compare=False)


def find_refs(text: str, lineno: int) -> list[CodeRef]:
    """References in one line of prose (code blocks are skipped by the caller)."""
    refs: list[CodeRef] = []
    spans: list[tuple[int, int]] | None = None  # (found once a reference is: most lines hold none)
    for match in _REF.finditer(text):
        path = match.group("path")
        if spans is None:
            spans = [(m.start(2), m.end(2)) for m in _CODE_SPAN.finditer(text)]
        in_code = any(a <= match.start() and match.end() <= b for a, b in spans)
        extension = path.rsplit(".", 1)[-1].lower()
        if not in_code and "/" not in path and extension not in _PLAIN_EXTENSIONS:
            continue
        start = int(match.group("start"))
        end = int(match.group("end") or start)
        refs.append(CodeRef(path, start, end, lineno, (match.start(), match.end())))
    return refs


# A referenced file larger than this is not source code: it is not read (the workspace is the
# model's to write, and an 8 GiB file there would be read whole by every check and by each
# SessionStart's detached refresh).
MAX_SOURCE_BYTES = 32 << 20


class FileCache:
    """Lines of referenced files, read once per check."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lines: dict[str, list[bytes] | None] = {}
        self.too_large: set[str] = set()
        self._resolved: dict[str, Path | None] = {}
        self._root = self.root.resolve()
        self._names: dict[str, list[str]] | None = None
        self._outlines: dict[str, Outline] = {}
        self._positions: dict[str, dict[bytes, list[int]]] = {}

    def positions(self, path: str) -> dict[bytes, list[int]]:
        """Where each line of a file is (0-based), to find a reference's lines quickly."""
        if path not in self._positions:
            index: dict[bytes, list[int]] = {}
            for i, line in enumerate(self.lines(path) or ()):
                index.setdefault(line, []).append(i)
            self._positions[path] = index
        return self._positions[path]

    def outline(self, path: str) -> Outline | None:
        """The definitions enclosing each line of a file (:mod:`journal_agent.journal.scope`)."""
        if path not in self._outlines:
            lines = self.lines(path)
            if lines is None:
                return None
            from journal_agent.journal.scope import outline

            self._outlines[path] = outline(lines, path)
        return self._outlines[path]

    def resolve(self, path: str) -> Path | None:
        if path not in self._resolved:
            self._resolved[path] = self._resolve(path)
        return self._resolved[path]

    def _resolve(self, path: str) -> Path | None:
        candidate = Path(path)
        full = candidate if candidate.is_absolute() else self.root / candidate
        try:
            full = full.resolve()
            full.relative_to(self._root)
        except (ValueError, OSError):
            return None
        return full

    def same_name(self, path: str) -> str | None:
        """The one file of the project with this file name, for "did you mean" hints."""
        name = Path(path).name
        if self._names is None:
            self._names = {}
            seen = 0
            for top, dirs, names in os.walk(self.root):
                dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS]
                for n in names:
                    rel = os.path.relpath(os.path.join(top, n), self.root)
                    self._names.setdefault(n, []).append(rel.replace(os.sep, "/"))
                seen += len(names)
                if seen > 50_000:  # a huge tree: no hint rather than a slow check
                    break
        found = [p for p in self._names.get(name, []) if p != path]
        return found[0] if len(found) == 1 else None

    def lines(self, path: str) -> list[bytes] | None:
        if path not in self._lines:
            full = self.resolve(path)
            data = None if full is None else self._read(path, full)
            if data is None:
                self._lines[path] = None
            else:
                parts = data.split(b"\n")
                if parts and parts[-1] == b"":
                    parts.pop()
                self._lines[path] = [p.rstrip(b"\r") for p in parts]
        return self._lines[path]

    def _read(self, path: str, full: Path) -> bytes | None:
        """A regular file's bytes, at most :data:`MAX_SOURCE_BYTES`; None otherwise. Opened
        without blocking: a FIFO swapped in after the path was resolved cannot hang a check."""
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(MAX_SOURCE_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > MAX_SOURCE_BYTES:
            self.too_large.add(path)
            return None
        return data


def resolve_problem(ref: CodeRef, files: FileCache) -> str | None:
    """Why ``ref`` does not resolve to existing lines, or None when it does."""
    if files.resolve(ref.path) is None:
        return f"{ref.key}: the path is outside the workspace"
    lines = files.lines(ref.path)
    if lines is None and ref.path in files.too_large:
        return f"{ref.key}: the file is over {MAX_SOURCE_BYTES >> 20} MiB, too large to be source"
    if lines is None:
        hint = files.same_name(ref.path)
        if hint:
            lines_part = ref.key.rsplit(":", 1)[-1]
            return (
                f"{ref.key}: no such file (paths are relative to the project root: did you "
                f"mean {hint}:{lines_part}?)"
            )
        return f"{ref.key}: no such file"
    if ref.start < 1 or ref.end < ref.start:
        return f"{ref.key}: not a valid line range"
    if ref.end > len(lines):
        return f"{ref.key}: the file has only {len(lines)} lines"
    return None


def window_hash(lines: list[bytes]) -> str:
    """The hash of consecutive lines, as recorded for a reference."""
    return hashlib.sha256(b"\n".join(lines)).hexdigest()[:16]


def content_hash(ref: CodeRef, files: FileCache) -> str | None:
    lines = files.lines(ref.path)
    if lines is None or ref.end > len(lines) or ref.start < 1:
        return None
    return window_hash(lines[ref.start - 1 : ref.end])


CONTEXT_LINES = 3  # lines kept above and below a reference, to tell repeated code apart
MAX_KEPT_LINES = 200  # a longer reference keeps its hash and context, not its text


@dataclass(frozen=True)
class Anchor:
    """What a reference needs to be found again: the hash of its lines, the lines themselves
    (for the diff when they change; secrets redacted), a few lines of context on each side,
    the commit the file was at when it is in git and unmodified (for git's renames), and the
    definitions enclosing the lines (``scope``: their header lines, outermost first; None when
    recorded before scopes were) with how many other places of the file held the same lines
    at the time, in the same definitions (``copies``) and in others (``twins``)."""

    hash: str
    count: int = 0  # lines referenced (0: an old record that kept only the hash)
    text: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    commit: str | None = None
    scope: tuple[str, ...] | None = None
    copies: int = 0
    twins: int = 0

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"hash": self.hash, "count": self.count}
        for name in ("text", "before", "after"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        if self.commit:
            out["commit"] = self.commit
        if self.scope is not None:
            out["scope"] = list(self.scope)
        for name in ("copies", "twins"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Anchor:
        if isinstance(data, str):  # written before anchors: the hash alone
            return cls(hash=data)
        if not isinstance(data, dict):
            raise TypeError("an anchor is an object")

        def lines(name: str) -> tuple[str, ...]:
            return tuple(str(x) for x in data.get(name) or ())

        commit = data.get("commit")
        scope = data.get("scope")
        return cls(
            hash=str(data["hash"]),
            count=int(data.get("count") or 0),
            text=lines("text"),
            before=lines("before"),
            after=lines("after"),
            commit=str(commit) if commit else None,
            scope=lines("scope") if isinstance(scope, list) else None,
            copies=int(data.get("copies") or 0),
            twins=int(data.get("twins") or 0),
        )


def decode_line(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


class RefStore:
    """``.journal/refs.jsonl``: one ``{"entry": id, "refs": {ref: hash}, "anchors": {ref:
    anchor}}`` line per append, refresh or fix.

    Append-only (O(1) per append on a journal of any size); a later line for the same entry
    wins. A line torn by a crash is skipped when reading and fenced off when writing. ``refs``
    keeps the plain hashes that readers of the first format (the hooks) understand.
    """

    def __init__(self, path: Path, anchor: Path | None = None) -> None:
        from journal_agent.paths import anchor_of

        self.path = path
        # The workspace above .journal/: the file is reached from it without following a link.
        self.anchor = anchor or anchor_of(path)

    def _items(self) -> list[dict]:
        from journal_agent.jsonl import read_objects

        return [item for item in read_objects(self.anchor, self.path) if "entry" in item]

    def load(self) -> dict[str, dict[str, str]]:
        """``{entry: {ref: hash}}``."""
        out: dict[str, dict[str, str]] = {}
        for item in self._items():
            try:
                out[str(item["entry"])] = {str(k): str(v) for k, v in item["refs"].items()}
            except (KeyError, TypeError, AttributeError):
                continue
        return out

    def anchors(self) -> dict[str, dict[str, Anchor]]:
        """``{entry: {ref: anchor}}`` (an anchor of the first format has only its hash)."""
        return {entry: anchors for entry, anchors, _ in self._anchored()}

    def anchors_on_disk(self) -> AnchorsOnDisk:
        """``anchors()`` read when asked: one pass finds each entry's last valid line and only
        its place is kept; its anchors are made from the file again when an entry is asked
        for. Memory bounded by one line, not the file (a journal's refs.jsonl grows with it:
        its lines held 2 MB of the view server at 10,000 entries, the made anchors 13 MB)."""
        return AnchorsOnDisk(self.anchor, self.path)

    def _anchored(self) -> Iterator[tuple[str, dict[str, Anchor], bytes]]:
        from journal_agent.jsonl import read_lines

        for raw, item in read_lines(self.anchor, self.path):
            if "entry" not in item:
                continue
            try:
                anchors = _anchors_of(item)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            yield str(item["entry"]), anchors, raw

    def record(self, entry_id: str, anchors: dict[str, Anchor]) -> Callable[[], None]:
        """Store the anchors of one entry (call under the journal lock); return what takes them
        back, for a journal write that then fails (still under the lock)."""
        from journal_agent import confined

        item = {
            "entry": entry_id,
            "refs": {k: a.hash for k, a in anchors.items()},
            "anchors": {k: a.to_dict() for k, a in anchors.items()},
        }
        line = json.dumps(item, sort_keys=True, ensure_ascii=False).encode() + b"\n"
        # Whole or not at all (a full disk leaves no torn line and so no anchor at all: the
        # append that called this fails before the journal is written).
        size = confined.append(self.anchor, self.path, line, durable=True)
        self._remember()

        def take_back() -> None:
            confined.cut_back(self.anchor, self.path, size)
            self._remember()

        return take_back

    def _remember(self) -> None:
        """What ``journal check`` expects to find next (journal_agent.foreign_changes: an anchor
        another hand forged or removed is reported once). Never fails the append: a missed
        stamp is at worst one report too many."""
        import contextlib

        from journal_agent.foreign_changes import remember_file

        with contextlib.suppress(OSError, ValueError):
            remember_file(self.anchor, str(self.path.relative_to(self.anchor)))


def _anchors_of(item: object) -> dict[str, Anchor]:
    """One line's ``{ref: anchor}``; raises (KeyError, TypeError, ...) on a line without."""
    if not isinstance(item, dict):
        raise TypeError("a line of refs.jsonl is an object")
    saved = item.get("anchors") or item["refs"]
    return {str(k): Anchor.from_dict(v) for k, v in saved.items()}


class AnchorsOnDisk(Mapping[str, dict[str, Anchor]]):
    """``{entry: {ref: anchor}}`` over ``refs.jsonl`` (the last valid line of each entry),
    each line read and parsed when asked (:class:`journal_agent.jsonl.LatestLines`). Close it
    when done (``with``), or let it be collected."""

    def __init__(self, anchor: Path, path: Path) -> None:
        from journal_agent.jsonl import LatestLines

        self._lines = LatestLines(anchor, path, _entry_of)

    def __getitem__(self, entry: str) -> dict[str, Anchor]:
        from journal_agent.lightjson import loads

        return _anchors_of(loads(self._lines.line(entry)))

    def __iter__(self) -> Iterator[str]:
        return self._lines.keys()

    def __len__(self) -> int:
        return len(self._lines)

    def __contains__(self, entry: object) -> bool:
        return entry in self._lines

    def close(self) -> None:
        self._lines.close()

    def __enter__(self) -> AnchorsOnDisk:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _entry_of(item: dict) -> str | None:
    """The entry of a line of refs.jsonl that holds anchors, else None (as ``anchors()``)."""
    if "entry" not in item:
        return None
    try:
        _anchors_of(item)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return str(item["entry"])
