"""Gitignore-style path patterns as Claude Code's ``Read(...)`` / ``Edit(...)`` rules use them.

Where a pattern is anchored (Claude Code's documented prefixes):

- ``//abs/path/**``  an absolute path on the filesystem;
- ``~/path``         relative to the home directory;
- ``/path`` and ``./path`` relative to the workspace root;
- ``path/with/slash`` relative to the workspace root (gitignore: a slash anchors);
- ``name`` (no slash) matches that name at any depth, like ``.env`` or ``*.pem`` in .gitignore.

``*`` and ``?`` stay within one path segment, ``**`` crosses directories, ``[abc]`` is a class.
A pattern that matches a directory also matches everything inside it (as in .gitignore).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class PathPattern:
    base: Path | None  # None: unanchored, matches a single segment at any depth
    regex: re.Pattern[str]

    def matches(self, path: Path, root: Path) -> bool:
        if self.base is None:
            try:
                parts = path.relative_to(root).parts
            except ValueError:
                parts = path.parts
            return any(self.regex.fullmatch(part) for part in parts)
        try:
            rel = path.relative_to(self.base)
        except ValueError:
            return False
        parts = rel.parts
        if not parts:
            return bool(self.regex.fullmatch(""))
        # The path itself or any directory containing it.
        return any(self.regex.fullmatch("/".join(parts[:n])) for n in range(len(parts), 0, -1))


def translate_glob(pattern: str) -> str:
    """Translate a gitignore glob (already stripped of its anchor) to a regex body."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            before_ok = i == 0 or pattern[i - 1] == "/"
            after = pattern[i + 2 : i + 3]
            if before_ok and after == "/":
                out.append("(?:.*/)?")  # zero or more directories
                i += 3
                continue
            if before_ok and after == "":
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")  # "a**b" acts like "a*b", as in git
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@lru_cache(maxsize=512)
def compile_path_pattern(pattern: str, root: Path, home: Path | None = None) -> PathPattern:
    """Compile one rule's path pattern against a workspace ``root``."""
    pat = pattern.strip()
    if pat.startswith("//"):
        base: Path | None = Path("/")
        pat = pat[2:]
    elif pat == "~" or pat.startswith("~/"):
        base = home if home is not None else Path(os.path.expanduser("~"))
        pat = pat[2:]
    elif pat.startswith("./"):
        base, pat = root, pat[2:]
    elif pat.startswith("/"):
        base, pat = root, pat[1:]
    elif "/" in pat.rstrip("/"):
        base = root
    else:
        base = None
    pat = pat.rstrip("/")
    if base is not None:
        base = Path(os.path.realpath(base))
    if pat in ("", "."):
        pat = "**"
    return PathPattern(base, re.compile(translate_glob(pat), re.DOTALL))


def path_matches(pattern: str, path: Path, root: Path) -> bool:
    """True if ``path`` (absolute, resolved) falls under the gitignore-style ``pattern``."""
    return compile_path_pattern(pattern, root).matches(path, root)
