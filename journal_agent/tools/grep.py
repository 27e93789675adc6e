"""Grep: ripgrep over the workspace, with Claude Code's fields and output shapes."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.tools._budget import fit_to_budget
from journal_agent.tools._rg import (
    RG_TIMEOUT_S,
    UnignoredFiles,
    decode,
    reject_nul,
    rg_command,
    rg_paths_by_mtime,
    run_rg,
)
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import resolve_path, workspace_root

Visible = Callable[[str], bool] | None

DEFAULT_HEAD_LIMIT = 250
# Content kept per call even with head_limit 0: within Claude Code's 25,000-token limit for
# any text (dense text runs at 2-3 characters a token), so the paging note survives.
MAX_CONTENT_CHARS = 60_000
MAX_COLUMNS = 500  # minified files would otherwise flood the result with one line
NARROW_HINT = (
    "Narrow the search with a more specific pattern, path, glob or type, or page with "
    "head_limit and offset."
)


class GrepInput(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", json_schema_extra=tidy_schema)

    pattern: str = Field(
        description="The regular expression to search file contents for (ripgrep syntax)."
    )
    path: str | None = Field(
        default=None,
        description="File or directory to search in. Defaults to the workspace root.",
    )
    glob: str | None = Field(
        default=None,
        description='Only search files matching this glob, e.g. "*.py" or "*.{ts,tsx}".',
    )
    type: str | None = Field(
        default=None,
        description='Only search files of this ripgrep type, e.g. "py", "js", "rust", "md".',
    )
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        default="files_with_matches",
        description='"files_with_matches" (default) lists matching files, newest first; '
        '"content" shows matching lines; "count" shows the number of matches per file.',
    )
    case_insensitive: bool | None = Field(
        default=None, alias="-i", description="Case-insensitive search."
    )
    line_numbers: bool = Field(
        default=True,
        alias="-n",
        description='Show line numbers (output_mode "content" only). Default true.',
    )
    after: int | None = Field(
        default=None, ge=0, alias="-A", description='Lines to show after each match ("content").'
    )
    before: int | None = Field(
        default=None, ge=0, alias="-B", description='Lines to show before each match ("content").'
    )
    context: int | None = Field(
        default=None,
        ge=0,
        alias="-C",
        description='Lines to show before and after each match ("content").',
    )
    head_limit: int | None = Field(
        default=None,
        ge=0,
        description="Return at most this many lines / files / counts (default 250; 0 = no limit).",
    )
    offset: int | None = Field(
        default=None, ge=0, description="Skip this many lines / files / counts first (paging)."
    )
    multiline: bool | None = Field(
        default=None,
        description="Let patterns span lines; . also matches newlines. Default false.",
    )


class Grep(Tool[GrepInput]):
    name = "Grep"
    description = (
        "Search file contents in the workspace with ripgrep (regular expressions, .gitignore "
        "respected).\n"
        "- Use this instead of running grep or rg through Bash.\n"
        '- output_mode: "files_with_matches" (default: file paths, newest first), "content" '
        "(matching lines as path:line:text, with -A/-B/-C context and -n line numbers), "
        '"count" (matches per file).\n'
        '- Filter files with glob ("*.py", "**/*.{ts,tsx}") or type ("py", "js", "rust").\n'
        "- Regex syntax is ripgrep's: escape literal braces and parentheses "
        r"(e.g. `interface\{\}`); use multiline: true for patterns spanning lines."
        "\n- Results are capped by head_limit (default 250); page with offset."
    )
    Input = GrepInput

    def run(self, ctx: ToolContext, params: GrepInput) -> ToolResult:
        reject_nul(params)
        root = Path(workspace_root(ctx.root))
        target = resolve_path(root, params.path) if params.path else root
        if not target.exists():
            raise ToolError(f"{params.path} does not exist; give a file or directory to search.")
        if not (target.is_dir() or target.is_file()):
            # A FIFO would block rg forever, a device could stream without end.
            raise ToolError(
                f"{params.path} is not a regular file or a directory (a FIFO, socket or device); "
                "Grep searches files and directories."
            )
        if ctx.policy is not None:
            ctx.policy.ensure("Grep", path=target)
        rel = os.path.relpath(target, root)
        if ".git" in (part.lower() for part in Path(rel).parts):
            # Never .git/, even when named: a pattern is an oracle (does `oauth2:g` match? and
            # `oauth2:gh`?) that a redacted result does not close for a remote URL's token.
            raise ToolError(
                f"Grep does not search inside .git/ ({params.path}); Read a file there to see "
                "it (secrets shown redacted), or use Bash `git …` commands."
            )

        args = self._args(params)
        if rel != ".":
            args.append(rel)
        limit = DEFAULT_HEAD_LIMIT if params.head_limit is None else params.head_limit
        offset = params.offset or 0
        visible = ctx.policy.search_filter("Grep") if ctx.policy is not None else None
        if params.glob:
            # --glob would let rg search .gitignored files that match it; drop them again.
            visible = UnignoredFiles(root, [rel] if rel != "." else None).filter(visible)

        if params.output_mode == "content":
            entries, more, shown = _stream_content(
                args, root, offset, limit, visible, numbers=params.line_numbers
            )
            total, all_rows = None, []
            if limit == 0 and more:
                limit = shown  # stopped at the size limit: the next page starts after it
        else:
            all_rows = entries = self._collect(args, root, params.output_mode, visible)
            total = len(entries)
            more = limit > 0 and total > offset + limit
            entries = entries[offset : offset + limit] if limit else entries[offset:]

        text = self._render(params, entries, total, offset, more, limit, all_rows)
        if params.output_mode == "content" and more and (params.head_limit == 0):
            text = text.rsplit("\n\n[Showing", 1)[0] + (
                f"\n\n[Result truncated at the tool-result limit (about 25,000 tokens) after "
                f"lines {offset + 1}-{offset + limit}; more exist. Use offset={offset + limit} "
                f"for the next page, or narrow the search: {NARROW_HINT}]"
            )
        return ToolResult(fit_to_budget(text, narrow_hint=NARROW_HINT))

    @staticmethod
    def _args(p: GrepInput) -> list[str]:
        args = ["--null", "--max-columns", str(MAX_COLUMNS), "--max-columns-preview"]
        if p.case_insensitive:
            args.append("-i")
        if p.multiline:
            args += ["-U", "--multiline-dotall"]
        if p.glob:
            for g in _split_globs(p.glob):
                args += ["--glob", g]
        if p.type:
            args += ["--type", p.type]
        if p.output_mode == "files_with_matches":
            args.append("--files-with-matches")  # ordered by mtime afterwards
        elif p.output_mode == "count":
            args.append("--count-matches")
        else:
            # A fixed order, so that offset paging returns consistent pages.
            args += ["--no-heading", "--with-filename", "--sort", "path"]
            # Always asked for: with --null, the number's ":" / "-" is the only thing telling
            # a match from a context line; dropped again when -n is false.
            args.append("--line-number")
            if p.context is not None:
                args += ["-C", str(p.context)]
            if p.after is not None:
                args += ["-A", str(p.after)]
            if p.before is not None:
                args += ["-B", str(p.before)]
        args += ["--regexp", p.pattern]
        return args

    @staticmethod
    def _collect(args: list[str], root: Path, mode: str, visible: Visible) -> list[str]:
        if mode == "files_with_matches":
            paths, code, err = rg_paths_by_mtime(args, root, visible=visible)
            _raise_for_rg(code, err, args)
            return paths
        proc = run_rg(args, root)
        _raise_for_rg(proc.returncode, decode(proc.stderr), args)
        out = decode(proc.stdout)
        rows = []
        for line in out.splitlines():
            path, _, count = line.partition("\0")
            if visible is None or visible(path):
                rows.append(f"{path}:{count}")
        rows.sort()
        return rows

    @staticmethod
    def _render(
        p: GrepInput,
        entries: list[str],
        total: int | None,
        offset: int,
        more: bool,
        limit: int,
        all_rows: list[str],
    ) -> str:
        if not entries:
            if offset and (total or 0) > 0:
                return f"No results past offset {offset} (there are {total})."
            return "No files found" if p.output_mode == "files_with_matches" else "No matches found"
        if p.output_mode == "files_with_matches":
            head = f"Found {total} file{'s' if total != 1 else ''}"
            body = "\n".join(entries)
            text = f"{head}\n{body}"
        elif p.output_mode == "count":
            # Totals over every matching file, not just this page.
            matches = sum(_count_of(row) for row in all_rows)
            files = len(all_rows)
            text = "\n".join(entries) + (
                f"\n\nFound {matches} total occurrence{'s' if matches != 1 else ''} "
                f"across {files} file{'s' if files != 1 else ''}."
            )
        else:
            text = "\n".join(entries)
        if more:
            unit = {"content": "lines", "count": "files", "files_with_matches": "files"}[
                p.output_mode
            ]
            of = f" of {total}" if total is not None else ""
            text += (
                f"\n\n[Showing {unit} {offset + 1}-{offset + len(entries)}{of}; more exist. "
                f"Use offset={offset + limit} for the next page, or narrow the search with path, "
                f"glob or type.]"
            )
        return text


def _count_of(row: str) -> int:
    count = row.rsplit(":", 1)[-1]
    return int(count) if count.isdigit() else 0


def _split_globs(glob: str) -> list[str]:
    """ "*.py *.md" or "*.py,*.md" → two globs; commas inside braces stay ("*.{ts,tsx}")."""
    parts, depth, cur = [], 0, ""
    for ch in glob:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        if depth == 0 and (ch.isspace() or ch == ","):
            if cur:
                parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur:
        parts.append(cur)
    return parts


def _raise_for_rg(returncode: int, stderr: str, args: list[str]) -> None:
    if returncode in (0, 1):
        return
    if "regex parse error" in stderr or "error parsing regex" in stderr.lower():
        pattern = args[args.index("--regexp") + 1]
        # rg's last line names the problem ("error: unclosed group"); its echo of the
        # pattern is rg's rewritten form, which would only confuse.
        problem = next(
            (ln.split("error:", 1)[1].strip() for ln in reversed(stderr.splitlines())
             if "error:" in ln),
            _first_lines(stderr, 1),
        )  # fmt: skip
        raise ToolError(
            f"Invalid regular expression {pattern!r}: {problem}. Escape special characters "
            "with a backslash (\\( \\[ \\{ \\. for literal ones) or simplify the pattern."
        )
    if "unrecognized file type" in stderr:
        raise ToolError(
            f"{_first_lines(stderr, 1)} — use a ripgrep type such as py, js, ts, rust, go, md, "
            "or filter with glob instead."
        )
    if returncode == 2 and stderr and not re.search(r"error|invalid", stderr, re.I):
        return  # partial errors (an unreadable file) with results still useful
    raise ToolError(f"ripgrep failed: {_first_lines(stderr, 4) or f'exit code {returncode}'}")


def _first_lines(text: str, n: int) -> str:
    return "\n".join(text.strip().splitlines()[:n])


def _stream_content(
    args: list[str], root: Path, offset: int, limit: int, visible: Visible, *, numbers: bool = True
) -> tuple[list[str], bool, int]:
    """Read rg's content output only as far as the page needs, then stop rg.

    ``limit`` 0 ("no limit") still stops at :data:`MAX_CONTENT_CHARS`, about Claude Code's
    tool-result limit: a pattern matching millions of lines costs the first page's worth of
    memory, not gigabytes. Returns the lines, whether more exist, and how many were shown.
    """
    proc = subprocess.Popen(
        rg_command(args, root),
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    # However slow rg is (a pathological pattern on a large file), the call ends in time.
    watchdog = threading.Timer(RG_TIMEOUT_S, proc.kill)
    watchdog.start()
    entries: list[str] = []
    seen = shown = chars = 0
    more = False
    try:
        for raw in proc.stdout:
            line = decode(raw).rstrip("\n")
            if line == "--":  # rg's separator between context groups
                if entries and entries[-1] != "--":
                    entries.append("--")
                continue
            path, sep, rest = line.partition("\0")
            if not sep or (visible is not None and not visible(path)):
                continue
            seen += 1
            if seen <= offset:
                continue
            if (limit and shown >= limit) or chars > MAX_CONTENT_CHARS:
                more = True
                break
            # "12:text" is a match, "12-text" a context line: keep rg's usual separators.
            m = _LINE_NO.match(rest)
            if m and not numbers:
                rest = rest[m.end() :]
            entries.append(f"{path}{m.group(2)}{rest}" if m else f"{path}:{rest}")
            chars += len(entries[-1]) + 1
            shown += 1
        if more:
            proc.kill()
        try:
            _, err = proc.communicate(timeout=RG_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            err = b""
    finally:
        timed_out = not watchdog.is_alive() and not more
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    returncode = proc.wait()  # rg has ended (the finally made sure): its exit status
    if timed_out and returncode < 0:
        raise ToolError(
            f"The search took longer than {RG_TIMEOUT_S} s and was stopped; simplify the pattern "
            "or narrow the search with path, glob or type."
        )
    if not more:
        _raise_for_rg(returncode, decode(err or b""), args)
    while entries and entries[-1] == "--":
        entries.pop()
    if entries and entries[0] == "--":
        entries.pop(0)
    return entries, more, shown


_LINE_NO = re.compile(r"^(\d+)([:-])")
