"""From a turn's text to moments: ``★ Insight`` blocks, private spans, measurement records.

Claude Code's Explanatory style (and our "Learning journal" style) marks what is worth learning
as

    `★ Insight ─────────────────────────────────────`
    [2-3 key educational points]
    `─────────────────────────────────────────────────`

``★`` is U+2605; terminals without Unicode get ``✶`` (U+2736) instead. A block without its
closing rule runs to the end of the message.

Stdlib only (imported by the hook under ``python3 -I -S``), apart from the project's one secret
detector, :mod:`journal_agent.secret_text`, which is stdlib only too. ``re`` (with ``enum`` and
the regex compiler, about 7 ms of CPU) is imported only for a text that holds an Insight marker
or a record id: most turns have neither, and their Stop hook never pays for it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

_MARKERS = ("★ Insight", "✶ Insight")  # what every match of INSIGHT contains
_RECORD_MARK = "[m:"  # … and of RECORD
_INSIGHT = (
    r"`?[★✶] Insight[ ─\-]*`?[ \t]*\r?\n(?P<body>.*?)(?:\r?\n[ \t]*`?─{3,}`?[ \t]*(?=\r?\n|\Z)|\Z)"
)
# An opening or closing private tag, in any case, spaces allowed: <private>, </ PRIVATE >.
_PRIVATE = r"<[ \t]*(/?)[ \t]*private\b[^<>\n]{0,80}>"
# The id grammar of profiling.records (letters, digits, '.', '_', '-'), as [m:<id>].
_RECORD = r"\[m:([A-Za-z0-9][A-Za-z0-9._\-]{0,80})\]"
_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(name: str) -> re.Pattern[str]:
    """The compiled pattern ``name`` (compiled, and ``re`` imported, on first use)."""
    if name not in _compiled:
        import re

        flags = {"insight": re.S, "private": re.I | re.A, "record": 0}[name]
        source = {"insight": _INSIGHT, "private": _PRIVATE, "record": _RECORD}[name]
        _compiled[name] = re.compile(source, flags)
    return _compiled[name]


def without_private(text: str) -> str:
    """``text`` (one message) with every ``<private>…</private>`` span removed: see
    :func:`private_removed`."""
    return private_removed([text])[0]


def private_removed(blocks: list[str]) -> list[str]:
    """The text blocks of one message with every ``<private>…</private>`` span removed across
    them: what the user marked private is never captured, not even redacted.

    A span may open in one block and close in another (the blocks between go whole); spans
    nest (``<private>a<private>b</private>c</private>`` hides ``c`` too); one left open runs to
    the end of the message, and a closing tag with none open hides everything before it in the
    message (its opening tag was in an earlier message). Blocks that hold no tag are returned as
    they are, without importing ``re``."""
    if not any("private" in block.lower() for block in blocks):
        return blocks
    out: list[list[str]] = []
    depth = 0
    for block in blocks:
        kept: list[str] = []
        at = 0
        for tag in _pattern("private").finditer(block):
            if depth == 0:
                kept.append(block[at : tag.start()])
            if tag.group(1):  # a closing tag
                if depth == 0:  # closes a span opened before this message: all of it so far
                    out = [[] for _ in out]
                    kept = []
                depth = max(0, depth - 1)
            else:
                depth += 1
            at = tag.end()
        if depth == 0:
            kept.append(block[at:])
        out.append(kept)
    return ["".join(kept) for kept in out]


def insights(text: str) -> list[str]:
    """The bodies of the Insight blocks in ``text`` (private spans already removed), trimmed."""
    if not any(marker in text for marker in _MARKERS):
        return []
    out = []
    for match in _pattern("insight").finditer(without_private(text)):
        body = _unfenced(match.group("body").strip())
        if body:
            out.append(body)
    return out


def _unfenced(body: str) -> str:
    """``body`` without a backtick left over from a rule at either end: one that the line it
    stands on does not pair (an odd count there, not a code fence). Inline code that opens or
    closes the Insight (`` `torch.compile` fuses… ``) keeps its backticks."""
    first, _, _ = body.partition("\n")
    if body.startswith("`") and not first.startswith("```") and first.count("`") % 2:
        body = body[1:].lstrip()
    last = body.rpartition("\n")[2]
    if body.endswith("`") and not last.lstrip().startswith("```") and last.count("`") % 2:
        body = body[:-1].rstrip()
    return body


def records_created(texts: list[str], root: str | os.PathLike[str]) -> list[str]:
    """Record ids the turn's tool results name that exist as plain files under the project's
    ``.journal/measurements/``, in order (a link there names no record)."""
    import stat

    from journal_agent import confined

    out: list[str] = []
    for text in texts:
        if _RECORD_MARK not in text:
            continue
        for ident in _pattern("record").findall(text):
            if ident in out:
                continue
            st = confined.lstat(root, os.path.join(".journal", "measurements", f"{ident}.json"))
            if st is not None and stat.S_ISREG(st.st_mode):
                out.append(ident)
    return out


def redact(text: str) -> str:
    """``text`` with secrets replaced by ``[REDACTED]``, by the project's one detector."""
    from journal_agent.secret_text import redact_secrets

    return redact_secrets(text)
