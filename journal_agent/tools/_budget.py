"""Keep every tool result within a token budget, as Claude Code does (about 25,000 tokens).

Counting uses the shared offline encoder (:mod:`journal_agent.tokenizer`): not Claude's
tokenizer, but close enough for a budget. It is built on first use only.
"""

from __future__ import annotations

from journal_agent.tokenizer import encoding

DEFAULT_MAX_TOKENS = 25_000

# A BPE token covers at least one UTF-8 byte and a character is at most four bytes, so text of
# at most ``max_tokens // 4`` characters (or ``max_tokens`` bytes) fits without encoding.
_MAX_BYTES_PER_CHAR = 4
# Tokens reserved for the truncation note itself.
_NOTE_RESERVE = 200
# When cutting, prefer a line boundary unless it throws away more than this share of the kept text.
_LINE_CUT_SLACK = 0.2


def count_tokens(text: str) -> int:
    """The number of tokens in ``text`` (special-token strings count as plain text)."""
    return len(encoding().encode_ordinary(text))


def _surely_fits(text: str, max_tokens: int) -> bool:
    """Decide without encoding when the text is short enough that it must fit."""
    if len(text) * _MAX_BYTES_PER_CHAR <= max_tokens:
        return True
    return len(text) <= max_tokens and len(text.encode("utf-8", "surrogatepass")) <= max_tokens


def fits(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> bool:
    return _surely_fits(text, max_tokens) or count_tokens(text) <= max_tokens


def fit_to_budget(
    text: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    narrow_hint: str = "Narrow the request to get a smaller result.",
) -> str:
    """Return ``text`` unchanged if it fits ``max_tokens``; else its beginning plus a note.

    The note says how much was cut and how to narrow the request (``narrow_hint``).
    """
    if _surely_fits(text, max_tokens):
        return text
    enc = encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    keep = max(max_tokens - _NOTE_RESERVE, max_tokens // 2)
    head = enc.decode_bytes(tokens[:keep]).decode("utf-8", "ignore")
    cut = head.rfind("\n")
    if cut >= len(head) * (1 - _LINE_CUT_SLACK):
        head = head[:cut]
    shown_lines = head.count("\n") + 1
    total_lines = text.count("\n") + 1
    note = (
        f"[Result truncated: it is {len(tokens):,} tokens, over the {max_tokens:,}-token limit; "
        f"showing the first {shown_lines:,} of {total_lines:,} lines. {narrow_hint}]"
    )
    return f"{head}\n\n{note}"
