"""The ledger's lines one at a time: table rows and cells, checkboxes, rules, dates.

Line-level Markdown of ``learning_ledger.md``, kept apart from the ledger's structure
(:mod:`journal_agent.learning.ledger`): the check and the edits read lines with these too.
"""

from __future__ import annotations

import re

from journal_agent.journal._text import bare

_RULE = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_LAST_UPDATED = re.compile(
    r"^\s*\*\*\s*(?:last[ \t]+updated|updated|最后更新|更新)\s*:?\s*\*\*\s*:?\s*"
    r"(?P<date>\d{4}-\d{2}-\d{2})?",
    re.IGNORECASE,
)
_CHECKBOX = re.compile(r"^(?P<head>[ \t]{0,3}[-*+][ \t]+\[)(?P<state>[ xX])\][ \t]+(?P<text>.*)$")
_BAD_CHECKBOX = re.compile(r"^[ \t]{0,3}[-*+][ \t]+\[(?![ xX]\][ \t])[^\]]{0,3}\]")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_BOLD_CELL = re.compile(r"^(?P<lead>\s*)\*\*(?P<text>.*\S.*?)\*\*(?P<trail>\s*)$")


def is_rule(line: str) -> bool:
    return bool(_RULE.match(bare(line)))


def split_row(line: str) -> list[str]:
    """The cells of a table row (``\\|`` is a pipe inside a cell)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return _CELL_SPLIT.split(line)


def is_bold_cell(cell: str) -> bool:
    return bool(_BOLD_CELL.match(cell))


def unbold_cell(cell: str) -> str:
    match = _BOLD_CELL.match(cell)
    return match.group("lead") + match.group("text") + match.group("trail") if match else cell


def unbold_row(line: str) -> str:
    """The row with each wholly bold cell made plain, spacing kept."""
    text = bare(line)
    ending = line[len(text) :]
    indent = text[: len(text) - len(text.lstrip())]
    body = text.strip()
    lead = body.startswith("|")
    trail = body.endswith("|") and not body.endswith("\\|")
    inner = body[1 if lead else 0 : len(body) - 1 if trail else len(body)]
    cells = [unbold_cell(c) for c in _CELL_SPLIT.split(inner)]
    return indent + ("|" if lead else "") + "|".join(cells) + ("|" if trail else "") + ending


def is_date(text: str) -> bool:
    return bool(_DATE.match(text))


def bad_checkbox(line: str) -> bool:
    return bool(_BAD_CHECKBOX.match(bare(line)))


def checkbox_match(line: str) -> re.Match[str] | None:
    return _CHECKBOX.match(bare(line))


def last_updated_match(line: str) -> re.Match[str] | None:
    return _LAST_UPDATED.match(bare(line))
