"""Glob patterns as ripgrep's ``--glob`` reads them, compiled to a Python regex.

Glob lists ``rg --files`` (which applies .gitignore) and matches the paths here, instead of
passing ``--glob`` to rg: rg's ``--glob`` overrides .gitignore (``--glob '*.log'`` lists an
ignored ``app.log``), and running a second walk to undo that doubles the cost.

The syntax is globset's with ``literal_separator``: ``*`` and ``?`` stay within one path
component, ``**`` as a whole component spans any number of them, ``[...]`` / ``[!...]``
classes, ``{a,b}`` alternatives (not nested) and ``\\`` escapes. The pattern is matched
against the whole path relative to the search directory (use ``fullmatch``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from journal_agent.tools.base import ToolError


@lru_cache(maxsize=64)
def compile_glob(pattern: str, shown: str | None = None) -> re.Pattern[str]:
    """A regex matching the relative paths ``pattern`` matches; ToolError if it is malformed.

    ``shown`` is the pattern as the model wrote it, for the error message.
    """
    shown = pattern if shown is None else shown
    out: list[str] = []
    i, n = 0, len(pattern)
    in_braces = False
    while i < n:
        c = pattern[i]
        if c == "*":
            piece, i = _stars(pattern, i)
            out.append(piece)
        elif c == "?":
            out.append("[^/\\0]")
            i += 1
        elif c == "[":
            piece, i = _char_class(pattern, i, shown)
            out.append(piece)
        elif c == "{":
            if in_braces:
                raise ToolError(
                    f"Invalid glob pattern {shown!r}: nested alternatives {{...{{...}}}} are "
                    "not supported."
                )
            in_braces = True
            out.append("(?:")
            i += 1
        elif c == "}" and in_braces:
            in_braces = False
            out.append(")")
            i += 1
        elif c == "," and in_braces:
            out.append("|")
            i += 1
        elif c == "\\":
            if i + 1 == n:
                raise ToolError(f"Invalid glob pattern {shown!r}: dangling '\\' at the end.")
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    if in_braces:
        raise ToolError(f"Invalid glob pattern {shown!r}: unclosed alternative; missing '}}'.")
    try:
        return re.compile("".join(out))
    except re.error as exc:
        raise ToolError(f"Invalid glob pattern {shown!r}: {exc}.") from None


def _stars(pattern: str, i: int) -> tuple[str, int]:
    """The regex for the run of ``*`` at ``i``, and the index after what it consumed."""
    n = len(pattern)
    j = i
    while j < n and pattern[j] == "*":
        j += 1
    whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
    if j - i >= 2 and whole:
        if j == n:
            return "[^\\0]*", j  # "dir/**": everything below
        return "(?:[^/\\0]*/)*", j + 1  # "**/": any number of directories, even none
    return "[^/\\0]*", j


def _char_class(pattern: str, i: int, shown: str) -> tuple[str, int]:
    """The regex for the ``[...]`` class at ``i``, and the index after its ``]``."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] in "!^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1  # a leading "]" is literal
    while j < n and pattern[j] != "]":
        j += 1
    if j >= n:
        raise ToolError(f"Invalid glob pattern {shown!r}: unclosed character class; missing ']'.")
    body = pattern[i + 1 : j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return (f"[^{body}\\0]" if negate else f"[{body}]"), j + 1
