"""Text from a file, made safe to show on a terminal: the one helper for it.

A terminal acts on what it is sent: ESC starts a sequence that moves the cursor, clears the
screen, sets the window title, defines a hyperlink or writes the clipboard (OSC 52), and C1
characters (U+0080–U+009F) start the same sequences on terminals that take them; the
bidirectional overrides reorder what is shown. Text from a file a repository planted (a
journal entry's title, a moment in the inbox, a record, a draft, a tool's output) would do all
that on ``journal-agent inbox show``. :func:`visible` writes each such character out instead
(``\\x1b``, ``\\u202e``), so the sequence is shown, inert, as what it is; newline and tab stay.

Every path that puts text from a file on the terminal goes through it (the CLI, the run's
rendering); the hooks use it too for what recall injects. Stdlib only, no ``re``: one
``str.translate``.
"""

from __future__ import annotations

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and
# isolates: what a terminal acts on or reorders instead of showing.
_UNSHOWN = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
_UNSHOWN += [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_WRITTEN_OUT = {c: ascii(chr(c))[1:-1] for c in _UNSHOWN}


def visible(text: str) -> str:
    """``text`` as a terminal shows it literally: every control character written out
    (``\\x1b[2J`` is shown, not obeyed); newlines and tabs kept."""
    return text.translate(_WRITTEN_OUT)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace, newlines included, become one space), every
    control character written out, at most ``limit`` characters (cut with "…")."""
    shown = visible(" ".join(text.split()))
    return shown if len(shown) <= limit else shown[: max(0, limit - 1)] + "…"


# In JSON: the same characters as \u escapes (C0 ones JSON escapes itself).
_JSON_ESCAPED = {c: f"\\u{c:04x}" for c in _UNSHOWN if c >= 0x7F}


def json_visible(text: str) -> str:
    """JSON text with the characters a terminal acts on that ``json.dumps(ensure_ascii=False)``
    leaves raw (DEL, C1 controls, bidirectional overrides) as ``\\u`` escapes: the same data
    once parsed (they can only stand inside strings)."""
    return text.translate(_JSON_ESCAPED)
