"""Where lines sit in the code: the chain of definitions enclosing them.

A reference's lines can occur twice in a file (``Client.send`` and ``AsyncClient.send`` share
most of their bodies). Their hash and a few lines of context cannot tell such twins apart; the
definitions around them can. So each anchor records its **scope**, the header lines of the
definitions enclosing the cited lines, outermost first (``class Client(BaseClient):``,
``def send(``), and a place is the same place only when its scope has the same names.

Enclosure is read from indentation, which every language we are cited in keeps: a line belongs
to the nearest header above it that is indented less. What counts as a header depends on the
file: ``def``/``class`` in Python; the keys that open a block in JSON, YAML and TOML; in other
languages a definition keyword (``function``, ``fn``, ``struct``, ``impl`` …) or a C-like
``name(…) {`` that is not a control statement. Blank lines, comments, lines inside a Python
string and lines that only close a bracket (``) -> Response:``, ``}``) change nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_PY = frozenset([".py", ".pyi", ".pyx", ".pxd"])
_CONFIG = frozenset([".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg"])
_PY_DEF = re.compile(rb"^((?:async\s+)?def|class)\s+(\w+)")
_DEF = re.compile(
    rb"^(?:(?:export|default|public|private|protected|internal|static|abstract|final|async|"
    rb"pub(?:\([\w:]+\))?|unsafe|extern|override|open|data|sealed|inline|virtual)\s+)*"
    rb"(def|class|function\*?|func|fn|struct|impl|trait|interface|enum|module|namespace|object|"
    rb"sub|procedure|union)\s+([\w.$:<>]+)"
)
_C_LIKE = re.compile(rb"^[\w\s:<>,*&~\[\]]*?\b(\w+)\s*\([^;]*$")
_CONTROL = frozenset(
    b"if elif else for while switch catch return do try with except finally case assert "
    b"print await yield raise lambda new delete throw until unless foreach sizeof".split()
)
_KEY = re.compile(rb"""^["']?([^"'\s:=][^"':=]*?)["']?\s*[:=]\s*[{\[]?\s*$""")
_CLOSERS = (b")", b"]", b"}", b"{")
_COMMENTS = (b"#", b"//", b"/*", b"* ", b"*/", b"--", b";")


def _indent(line: bytes) -> int:
    width = 0
    for byte in line:
        if byte == 0x20:
            width += 1
        elif byte == 0x09:
            width += 8 - width % 8
        else:
            break
    return width


def header_key(line: bytes, kind: str) -> bytes | None:
    """The name a header line defines (``async def send``, ``class Client``, a config key),
    or None when the line is not a header in a file of this ``kind`` (py, config, code)."""
    text = line.strip()
    if kind == "py":
        m = _PY_DEF.match(text)
        return b" ".join(m.group(1).split()) + b" " + m.group(2) if m else None
    if kind == "config":
        m = _KEY.match(text)
        return m.group(1).strip() if m else None
    m = _DEF.match(text)
    if m:
        return m.group(1) + b" " + m.group(2)
    m = _C_LIKE.match(text)
    if m and b"=" not in text.split(b"(", 1)[0]:
        first = text.split(None, 1)[0].split(b"(", 1)[0]
        if first not in _CONTROL and m.group(1) not in _CONTROL:
            return m.group(1)
    return None


def kind_of(path: str) -> str:
    dot = path.rfind(".")
    suffix = path[dot:].lower() if dot > path.rfind("/") else ""
    return "py" if suffix in _PY else "config" if suffix in _CONFIG else "code"


@dataclass(frozen=True)
class Outline:
    """Per line of one file: the index of the header enclosing it (-1: none), and the name
    each header line defines."""

    parent: tuple[int, ...]
    keys: dict[int, bytes]

    def chain(self, index: int) -> list[int]:
        """The headers around line ``index`` (0-based), outermost first, the line itself
        included when it is a header."""
        out = [index] if index in self.keys else []
        at = self.parent[index] if 0 <= index < len(self.parent) else -1
        while at >= 0:
            out.append(at)
            at = self.parent[at]
        return out[::-1]

    def names(self, index: int) -> tuple[bytes, ...]:
        return tuple(self.keys[i] for i in self.chain(index))

    def defines(self, names: Sequence[bytes]) -> list[int]:
        """The header lines whose chain of names is ``names``."""
        if not names:
            return []
        return [i for i, key in self.keys.items() if key == names[-1] and self.names(i) == names]

    def extent(self, header: int) -> tuple[int, int]:
        """0-based first and last line belonging to a header (the header included)."""
        last = header
        for i in range(header + 1, len(self.parent)):
            if self.parent[i] == -1 and i not in self.keys:
                break
            at = i
            while at >= 0 and at != header:
                at = self.parent[at]
            if at != header:
                break
            last = i
        return header, last


def outline(lines: Sequence[bytes], path: str) -> Outline:
    kind = kind_of(path)
    parent: list[int] = []
    keys: dict[int, bytes] = {}
    stack: list[tuple[int, int]] = []  # (indent, header line)
    quote: bytes | None = None
    for i, line in enumerate(lines):
        text = line.strip()
        if quote is not None:  # inside a Python string: its lines say nothing of structure
            parent.append(stack[-1][1] if stack else -1)
            if text.count(quote) % 2:
                quote = None
            continue
        if not text or text.startswith(_COMMENTS) or text.startswith(_CLOSERS):
            parent.append(stack[-1][1] if stack else -1)
            continue
        depth = _indent(line)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent.append(stack[-1][1] if stack else -1)
        key = header_key(line, kind)
        if key is not None:
            keys[i] = key
            stack.append((depth, i))
        if kind == "py":
            for mark in (b'"""', b"'''"):
                if text.count(mark) % 2:
                    quote = mark
                    break
    return Outline(tuple(parent), keys)
