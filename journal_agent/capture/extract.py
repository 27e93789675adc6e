"""From a turn's text to moments: ``★ Insight`` blocks, private spans, measurement records.

Claude Code's Explanatory style (and our "Learning journal" style) marks what is worth learning
as

    `★ Insight ─────────────────────────────────────`
    [2-3 key educational points]
    `─────────────────────────────────────────────────`

``★`` is U+2605; terminals without Unicode get ``✶`` (U+2736) instead. A block without its
closing rule runs to the end of the message.

Stdlib only (imported by the hook under ``python3 -I -S``), apart from the project's one secret
detector, :mod:`journal_agent.secret_text`, which is stdlib only too.
"""

from __future__ import annotations

import re
from pathlib import Path

INSIGHT = re.compile(
    r"`?[★✶] Insight[ ─\-]*`?[ \t]*\r?\n(?P<body>.*?)(?:\r?\n[ \t]*`?─{3,}`?[ \t]*(?=\r?\n|\Z)|\Z)",
    re.S,
)
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.S | re.I)
# The id grammar of profiling.records (letters, digits, '.', '_', '-'), as [m:<id>].
RECORD = re.compile(r"\[m:([A-Za-z0-9][A-Za-z0-9._\-]{0,80})\]")


def without_private(text: str) -> str:
    """``text`` with every ``<private>…</private>`` span removed (an unclosed one runs to the
    end): what the user marked private is never captured, not even redacted."""
    return _PRIVATE.sub("", text)


def insights(text: str) -> list[str]:
    """The bodies of the Insight blocks in ``text`` (private spans already removed), trimmed."""
    out = []
    for match in INSIGHT.finditer(without_private(text)):
        body = match.group("body").strip().strip("`").strip()
        if body:
            out.append(body)
    return out


def records_created(texts: list[str], measurements: Path) -> list[str]:
    """Record ids the turn's tool results name that exist under ``measurements``, in order."""
    out: list[str] = []
    for text in texts:
        for ident in RECORD.findall(text):
            if ident not in out and (measurements / f"{ident}.json").is_file():
                out.append(ident)
    return out


def redact(text: str) -> str:
    """``text`` with secrets replaced by ``[REDACTED]``, by the project's one detector."""
    from journal_agent.secret_text import redact_secrets

    return redact_secrets(text)
