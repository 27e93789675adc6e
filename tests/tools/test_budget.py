"""The token budget every tool result passes through."""

from __future__ import annotations

from journal_agent.tools._budget import count_tokens, fit_to_budget


def test_text_within_budget_is_returned_unchanged() -> None:
    assert fit_to_budget("short result") == "short result"
    text = "word " * 900  # ~900 tokens, more characters than max_tokens / 4
    assert fit_to_budget(text, max_tokens=1000) == text


def test_special_token_strings_are_plain_text() -> None:
    text = "<|endoftext|> " * 5000
    assert "Result truncated" in fit_to_budget(text, max_tokens=1000)


def test_over_budget_keeps_whole_leading_lines_and_says_how_to_narrow() -> None:
    lines = [f"{i}\tsome line of a log file with several words" for i in range(1, 5001)]
    text = "\n".join(lines)
    out = fit_to_budget(text, max_tokens=2000, narrow_hint="Use offset and limit.")
    head, note = out.rsplit("\n\n", 1)
    assert text.startswith(head + "\n")  # a prefix made of whole lines
    assert note.startswith("[Result truncated")
    assert "of 5,000 lines" in note
    assert note.endswith("Use offset and limit.]")
    assert count_tokens(out) <= 2000


def test_cut_never_splits_a_character() -> None:
    text = "日本語のテキスト😀" * 3000  # one long line of multi-token characters
    out = fit_to_budget(text, max_tokens=500)
    head = out.rsplit("\n\n", 1)[0]
    assert "\ufffd" not in head
    assert text.startswith(head)
    assert count_tokens(out) <= 500
