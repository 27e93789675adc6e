"""Read: numbered lines of a text file, as Claude Code's Read tool shows them.

The file is streamed in blocks, never loaded whole: lines before ``offset`` are only counted,
lines in range are kept (each cut at 2000 characters), and the content hash for optimistic
concurrency is computed in the same pass. Reading the last lines of a 1 GB file therefore
costs one sequential scan and a few megabytes of memory.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO, ClassVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from journal_agent.tools._budget import DEFAULT_MAX_TOKENS, count_tokens, fit_to_budget, fits
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import open_beneath, permitted_path, workspace_root
from journal_agent.tools.read_tracking import Fingerprint, tracker_for

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_SAFE_INTEGER = 9_007_199_254_740_991  # what Claude Code's schema allows (JS safe integer)
BLOCK = 1 << 20
# A kept line prefix always holds MAX_LINE_CHARS characters of UTF-8 (at most 4 bytes each).
_KEEP_BYTES = MAX_LINE_CHARS * 4 + 4
# Past the requested range we keep hashing (so Write/Edit can compare content) only for
# files up to this size; beyond it the stat identity stands in for the hash.
FULL_HASH_LIMIT = 32 << 20
_SNIFF_BYTES = 8192

# Known binary formats, refused by name before any sniffing.
# fmt: off
BINARY_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".ico", ".tiff", ".pdf", ".zip", ".gz",
    ".tgz", ".bz2", ".xz", ".zst", ".7z", ".tar", ".whl", ".jar", ".class", ".so", ".dylib",
    ".dll", ".exe", ".o", ".a", ".pyc", ".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy",
    ".npz", ".pkl", ".pickle", ".parquet", ".arrow", ".feather", ".h5", ".hdf5", ".onnx",
    ".sqlite", ".sqlite3", ".db", ".mp3", ".mp4", ".wav", ".mov", ".avi", ".mkv", ".woff",
    ".woff2", ".ttf", ".otf",
})
# fmt: on


def _drop_null_defaults(schema: dict[str, Any]) -> None:
    # Claude Code's schema has no ``"default": null`` on optional fields; keep ours identical.
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class ReadInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_drop_null_defaults)

    file_path: str = Field(
        description="The absolute path to the file to read (a relative path is taken from the "
        "workspace root)."
    )
    offset: Annotated[
        int | None,
        Field(ge=0, le=MAX_SAFE_INTEGER),
        WithJsonSchema(
            {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_SAFE_INTEGER,
                "description": "The line number to start reading from (1 is the first line). "
                "Only provide if the file is too large to read at once.",
            }
        ),
    ] = None
    limit: Annotated[
        int | None,
        Field(gt=0, le=MAX_SAFE_INTEGER),
        WithJsonSchema(
            {
                "type": "integer",
                "exclusiveMinimum": 0,
                "maximum": MAX_SAFE_INTEGER,
                "description": "The number of lines to read. Only provide if the file is too "
                "large to read at once.",
            }
        ),
    ] = None


@dataclass
class _Scan:
    lines: list[tuple[int, bytes, int]] = field(default_factory=list)  # (number, prefix, bytes)
    total_lines: int | None = None  # None: we stopped before the end
    more_after: bool = False
    sha256: str | None = None


class Read(Tool[ReadInput]):
    name: ClassVar[str] = "Read"
    description: ClassVar[str] = (
        "Reads a file from the local filesystem (inside the workspace).\n\n"
        "Usage:\n"
        "- file_path should be an absolute path; a relative path is resolved against the "
        "workspace root. Paths outside the workspace are refused.\n"
        f"- By default it reads up to {DEFAULT_LIMIT} lines from the start of the file. For long "
        "files give offset (the 1-based line to start at) and limit (how many lines), e.g. to "
        "read the end of a log.\n"
        f"- Lines longer than {MAX_LINE_CHARS} characters are cut, with a marker.\n"
        "- Output is numbered like `cat -n`: each line is the line number, a tab, then the line "
        "exactly as in the file. The number and tab are not part of the file: never include them "
        "in Edit's old_string.\n"
        "- Only text files: a binary file, a directory or a missing file gives a clear message. "
        "Use Glob or Bash `ls` to list a directory.\n"
        "- You must Read a file before you Write or Edit it. If the file changes on disk after "
        "you read it, Write and Edit fail and ask you to Read it again.\n"
        "- Secrets in a file (API keys, passwords, tokens in URLs, private keys) are shown as "
        "[REDACTED]. Edit and Write put each back where you keep its [REDACTED]; leave one out "
        "only to remove that value."
    )
    Input = ReadInput

    def run(self, ctx: ToolContext, params: ReadInput) -> ToolResult:
        path = permitted_path(ctx, self.name, params.file_path)
        tracker = tracker_for(ctx)
        start = max(params.offset or 1, 1)  # Claude Code treats offset 0 like 1
        limit = params.limit or DEFAULT_LIMIT

        try:
            st = os.stat(path)
        except FileNotFoundError:
            tracker.forget(path)
            raise ToolError(_missing_message(ctx.root, path)) from None
        except OSError as exc:
            raise ToolError(f"Cannot read {path}: {exc.strerror}.") from None
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(
                f"{path} is a directory, not a file. Use Glob (or Bash `ls`) to list what is in it."
            )
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(
                f"{path} is not a regular file (a device, FIFO or socket); Read "
                "shows regular text files only."
            )
        if path.suffix.lower() in BINARY_SUFFIXES:
            raise ToolError(_binary_message(path, st.st_size))

        try:
            fd = open_beneath(ctx.root, path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise ToolError(f"Cannot read {path}: {exc.strerror}.") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ToolError(f"{path} changed into something other than a file; Read it again.")
        try:
            with os.fdopen(fd, "rb") as f:
                if b"\x00" in f.read(_SNIFF_BYTES):
                    raise ToolError(_binary_message(path, st.st_size))
                f.seek(0)
                scan = _scan(f, start, limit, hash_everything=st.st_size <= FULL_HASH_LIMIT)
        except OSError as exc:
            raise ToolError(f"Cannot read {path}: {exc.strerror}.") from None

        tracker.record(path, Fingerprint.from_stat(st, scan.sha256))

        if scan.total_lines == 0:
            return ToolResult(f"The file {path} exists but is empty (0 lines).")
        if not scan.lines:
            total = scan.total_lines
            assert total is not None, "a scan stops early only once it holds lines"
            return ToolResult(
                f"The file {path} has {_lines(total)}, fewer than the requested offset "
                f"{start}; use an offset between 1 and {total}."
            )
        lines = [_format_line(n, prefix, size) for n, prefix, size in scan.lines]
        body = "\n".join(lines)
        first, last = scan.lines[0][0], scan.lines[-1][0]
        within = True  # checked once here: encoding a large result twice is wasted time
        if not fits(body, DEFAULT_MAX_TOKENS - _NOTE_TOKENS):
            # Cut at a line and say exactly where to go on, rather than a generic hint.
            keep = _lines_within(lines, DEFAULT_MAX_TOKENS - _NOTE_TOKENS)
            within = keep > 0
            keep = max(keep, 1)
            last = first + keep - 1
            of_total = f" of {scan.total_lines:,}" if scan.total_lines is not None else ""
            body = "\n".join(lines[:keep]) + (
                f"\n\n[Showing lines {first}-{last}{of_total}: the requested range is over the "
                f"{DEFAULT_MAX_TOKENS:,}-token limit for one result. Use offset={last + 1} to read "
                "further, with a smaller limit, or Grep to find the lines you need.]"
            )
        elif scan.more_after:
            span = f"line {first}" if first == last else f"lines {first}-{last}"
            of_total = f" of {scan.total_lines}" if scan.total_lines is not None else ""
            body += (
                f"\n\n[Showing {span}{of_total}. The file continues: use "
                f"offset={last + 1} to read further.]"
            )
        if within:
            return ToolResult(body)
        return ToolResult(
            fit_to_budget(
                body,
                narrow_hint=f"Use offset and limit to read a smaller range of {path}, or Grep "
                "to find the lines you need.",
            )
        )


_NOTE_TOKENS = 200  # room for the note that follows a cut


def _lines_within(lines: list[str], budget: int) -> int:
    """How many of ``lines`` (joined by newlines) fit in ``budget`` tokens."""
    used = 0
    for i, line in enumerate(lines):
        used += count_tokens(line) + 1
        if used > budget:
            return i
    return len(lines)


def _format_line(number: int, prefix: bytes, size: int) -> str:
    dropped = size > len(prefix)  # bytes beyond the kept prefix were never stored
    if prefix.endswith(b"\r"):
        prefix = prefix[:-1]  # CRLF files: show the line, not the carriage return
    text = prefix.decode("utf-8", "replace")
    if dropped or len(text) > MAX_LINE_CHARS:
        text = (
            f"{text[:MAX_LINE_CHARS]}… [line truncated: {size:,} bytes, first {MAX_LINE_CHARS} "
            "characters shown]"
        )
    return f"{number}\t{text}"


def _scan(f: BinaryIO, start: int, limit: int, *, hash_everything: bool) -> _Scan:
    """One sequential pass: count lines before ``start``, keep ``limit`` lines, hash."""
    out = _Scan()
    digest = hashlib.sha256()
    end = start + limit - 1  # last wanted line, 1-based
    done = 0  # lines completed (terminated by a newline) so far
    partial = False  # bytes seen after the last newline
    prefix = bytearray()
    size = 0
    while block := f.read(BLOCK):
        digest.update(block)
        pos, n = 0, len(block)
        while pos < n:
            current = done + 1
            if current < start:
                # Before the range: count newlines in C, no per-line Python work.
                need = start - current
                if block.count(b"\n", pos) < need:
                    done += block.count(b"\n", pos)
                    partial = not block.endswith(b"\n")
                    pos = n
                    break
                for _ in range(need):
                    pos = block.index(b"\n", pos) + 1
                done += need
                partial = False
            elif current <= end:
                nl = block.find(b"\n", pos)
                stop = n if nl == -1 else nl
                size += stop - pos
                if len(prefix) < _KEEP_BYTES:
                    prefix += block[pos : min(stop, pos + _KEEP_BYTES - len(prefix))]
                if nl == -1:
                    partial = True
                    pos = n
                else:
                    out.lines.append((current, bytes(prefix), size))
                    prefix.clear()
                    size = 0
                    done += 1
                    partial = False
                    pos = nl + 1
            else:
                out.more_after = True
                if not hash_everything:
                    return out  # total_lines and sha256 unknown: stat identity stands in
                rest = block[pos:]
                done += rest.count(b"\n")
                partial = not rest.endswith(b"\n")
                pos = n
    if partial:
        if start <= done + 1 <= end:
            out.lines.append((done + 1, bytes(prefix), size))
        elif done + 1 > end:
            out.more_after = True
        done += 1
    out.total_lines = done
    out.sha256 = digest.hexdigest()
    return out


def _lines(n: int) -> str:
    return f"{n:,} line" if n == 1 else f"{n:,} lines"


def _binary_message(path: Path, size: int) -> str:
    return (
        f"{path} is a binary file ({size:,} bytes); Read shows text files only. Use Bash "
        "(for example `file` or `xxd | head`) to inspect it."
    )


def _missing_message(root: Path, path: Path) -> str:
    message = f"File does not exist: {path}."
    parent = path.parent
    try:
        names = os.listdir(parent) if parent.is_dir() else []
    except OSError:
        names = []
    stem = path.stem.lower()
    similar = sorted(
        n for n in names if n.lower() == path.name.lower() or Path(n).stem.lower() == stem
    ) or difflib.get_close_matches(path.name, names, n=1, cutoff=0.8)
    if similar:
        message += f" Did you mean {parent / similar[0]}?"
    return message + f" (The workspace root is {workspace_root(root)}.)"
