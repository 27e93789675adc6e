"""Glob: find files by name, newest first, via ``rg --files`` (fast, .gitignore-aware)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.tools._budget import fit_to_budget
from journal_agent.tools._globmatch import compile_glob
from journal_agent.tools._rg import reject_nul, rg_paths_by_mtime
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import resolve_path, workspace_root

MAX_RESULTS = 100
NARROW_HINT = "Use a more specific path or pattern."


class GlobInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    pattern: str = Field(
        description='The glob pattern to match files against, e.g. "**/*.py" or "src/**/*.ts".'
    )
    path: str | None = Field(
        default=None,
        description="The directory to search in. Omit it to search the workspace root "
        '(do not pass "undefined" or "null").',
    )


class Glob(Tool[GlobInput]):
    name = "Glob"
    description = (
        "Fast file pattern matching over the workspace.\n"
        '- Supports glob patterns like "**/*.py" or "src/**/*.{ts,tsx}"; a pattern without a '
        'slash ("*.md") matches only in the search directory itself.\n'
        "- Respects .gitignore. Returns workspace-relative paths, most recently modified first, "
        f"at most {MAX_RESULTS}.\n"
        "- Use it to find files by name; use Grep to search their contents."
    )
    Input = GlobInput

    def run(self, ctx: ToolContext, params: GlobInput) -> ToolResult:
        reject_nul(params)
        root = Path(workspace_root(ctx.root))
        base = resolve_path(root, params.path) if params.path else root
        if not base.is_dir():
            what = "does not exist" if not base.exists() else "is not a directory"
            raise ToolError(f"{params.path} {what}; give a directory to search in.")
        if ctx.policy is not None:
            ctx.policy.ensure("Glob", path=base)
        pattern = _relative_pattern(params.pattern, base)

        prefix = os.path.relpath(base, root)
        prefix = "" if prefix == "." else prefix + "/"
        visible = ctx.policy.search_filter("Glob", secrets=False) if ctx.policy else None
        # Matched here, not with rg's --glob, which would list .gitignored files the pattern
        # names. A file-name type (which, unlike --glob, keeps the ignore rules) lets rg
        # prefilter on the last component; the full pattern is checked on what it prints.
        rx = _matcher(pattern, params.pattern)
        cut = len(prefix)

        def wanted(rel: str) -> bool:
            return rx.fullmatch(rel, cut) is not None and (visible is None or visible(rel))

        name = _name_glob(pattern)
        args = ["--files"]
        if name is not None:
            args += ["--type-add", f"{_TYPE}:{name}", "--type", _TYPE]
        rels, code, err = rg_paths_by_mtime(args, base, prefix=prefix, visible=wanted, root=root)
        if code not in (0, 1):
            first = err.strip().splitlines()
            raise ToolError(
                f"Invalid glob pattern {params.pattern!r}: {first[0] if first else 'rg failed'}"
            )
        if not rels:
            return ToolResult("No files found")

        shown = rels[:MAX_RESULTS]
        text = "\n".join(shown)
        if len(rels) > MAX_RESULTS:
            text += (
                f"\n\n[Showing the {MAX_RESULTS} most recently modified of {len(rels)} files. "
                f"{NARROW_HINT}]"
            )
        return ToolResult(fit_to_budget(text, narrow_hint=NARROW_HINT))


def _matcher(pattern: str, shown: str) -> re.Pattern[str]:
    """``pattern`` as returned by :func:`_relative_pattern`, matching like rg's ``--glob``."""
    anchored = pattern.startswith("/")
    body = pattern[1:] if anchored else pattern
    rx = compile_glob(body, shown)
    if not anchored and "/" not in body:
        # gitignore rules: a glob without a slash ("**.py") matches a name at any depth.
        rx = re.compile(r"(?:[^/\0]*/)*(?:" + rx.pattern + ")")
    return rx


_TYPE = "globname"


def _name_glob(pattern: str) -> str | None:
    """The pattern's last component, as a file-name glob every match's name satisfies.

    None when there is no such simple component ("src/**", a "/" inside [...] or {...},
    escapes): then rg lists every file and the full pattern alone decides.
    """
    if "\\" in pattern:
        return None
    depth, start = 0, 0
    for i, c in enumerate(pattern):
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == "/":
            if depth:
                return None
            start = i + 1
    name = pattern[start:]
    if not name or "**" in name or name.startswith("include:"):
        return None
    return name


def _relative_pattern(pattern: str, base: Path) -> str:
    """Make the pattern relative to the search directory, anchored like a shell glob."""
    pattern = pattern.strip()
    if not pattern:
        raise ToolError('The pattern is empty; give a glob such as "**/*.py".')
    if pattern.startswith("/"):
        # An absolute pattern is fine if it lies under the search directory.
        base_s = str(base).rstrip("/") + "/"
        if not pattern.startswith(base_s):
            raise ToolError(
                f"The pattern {pattern} points outside the search directory {base}; "
                "give a pattern relative to it."
            )
        pattern = pattern[len(base_s) :]
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if ".." in pattern.split("/"):
        raise ToolError("The pattern may not contain '..'; set path to another directory instead.")
    # rg globs follow .gitignore rules: without a slash they would match at every depth,
    # while a shell glob ("*.md") means this directory only. A leading "/" anchors it.
    if not pattern.startswith("**"):
        pattern = "/" + pattern
    return pattern
