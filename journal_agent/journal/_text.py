"""Small text helpers shared by the parser and the checks: lines, code fences, slugs."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept (only ``\\n`` ends a line; ``\\r`` stays with the line).

    ``str.splitlines`` would also split on form feeds and U+2028, which would break the
    byte-for-byte round trip; ``"".join(split_lines(t)) == t`` always holds.
    """
    if not text:
        return []
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def bare(line: str) -> str:
    """The line without its ending."""
    return line.rstrip("\r\n")


def fence_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it is inside a fenced code block (fence lines included)."""
    return _fences(lines)[0]


def open_fence(lines: list[str]) -> str | None:
    """The fence marker (e.g. ```` ``` ````) of a code block the lines leave open, if any."""
    marker = _fences(lines)[1]
    return marker or None


def _fences(lines: list[str]) -> tuple[list[bool], str]:
    mask: list[bool] = []
    marker = ""
    open_char = ""
    open_len = 0
    for line in lines:
        head = line.lstrip(" ")[:3]
        if head != "```" and head != "~~~":  # fast path: most lines are not fences
            mask.append(bool(open_char))
            continue
        match = _FENCE.match(bare(line))
        if not open_char:
            if match:
                open_char, open_len = match.group(1)[0], len(match.group(1))
                marker = match.group(1)
                mask.append(True)
            else:
                mask.append(False)
        else:
            mask.append(True)
            if (
                match
                and match.group(1)[0] == open_char
                and len(match.group(1)) >= open_len
                and not match.group(2).strip()
            ):  # the fence that closes the open block
                open_char = marker = ""
    return mask, marker


def slugify(text: str, limit: int = 60) -> str:
    """Lowercase words joined by ``-``; keeps non-Latin letters (CJK titles stay readable)."""
    words = re.findall(r"\w+", text.lower())
    slug = "-".join(words)
    if len(slug) > limit:
        slug = slug[:limit].rstrip("-")
    return slug or "entry"
