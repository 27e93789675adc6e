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
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and whole:
                if j == n:
                    out.append("[^\\0]*")  # "dir/**": everything below
                    i = j
                else:
                    out.append("(?:[^/\\0]*/)*")  # "**/": any number of directories, even none
                    i = j + 1
                continue
            out.append("[^/\\0]*")
            i = j
        elif c == "?":
            out.append("[^/\\0]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1  # a leading "]" is literal
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                raise ToolError(
                    f"Invalid glob pattern {shown!r}: unclosed character class; missing ']'."
                )
            body = pattern[i + 1 : j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
            out.append(f"[^{body}\\0]" if negate else f"[{body}]")
            i = j + 1
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
