"""The user's 20-section entry structure, as data: the one place that says what a section is.

Numbers, emoji and titles come from the user's ``/learn`` command and ``learning-journal``
agent. ``required`` follows their "Required Sections" list (header, context, key question).
Users edit entries by hand, so a section is recognised by its emoji, its number or any of its
aliases — never by exact spelling.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class SectionSpec:
    number: int
    key: str
    title: str
    emoji: str  # "" for sections the user's format writes without one
    aliases: tuple[str, ...]
    required: bool = False


SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec(1, "header", "Header", "", ("header",), required=True),
    SectionSpec(2, "context", "Context", "", ("context",), required=True),
    SectionSpec(
        3,
        "key_question",
        "The Key Question I Had",
        "",
        ("the key question i had", "key question i had", "the key question", "key question"),
        required=True,
    ),
    SectionSpec(4, "intuition", "Intuition", "🎯", ("intuition",)),
    SectionSpec(5, "key_insights", "Key Insights", "🔍", ("key insights", "insights")),
    SectionSpec(
        6,
        "math",
        "Mathematical Explanation",
        "🧮",
        ("mathematical explanation", "math", "mathematics", "formulas", "the math"),
    ),
    SectionSpec(7, "code", "Code Examples", "💻", ("code examples", "code example", "code")),
    SectionSpec(8, "analogy", "Analogy", "📝", ("analogy",)),
    SectionSpec(9, "toy_example", "Toy Example", "🧸", ("toy example", "toy examples")),
    SectionSpec(10, "diagrams", "Diagrams", "📐", ("diagrams", "diagram")),
    SectionSpec(
        11, "communication_flow", "Communication Flow", "🎨", ("communication flow", "timeline")
    ),
    SectionSpec(12, "works_well", "What Works Well", "✅", ("what works well", "strengths")),
    SectionSpec(
        13,
        "limitations",
        "Limitations/Pitfalls",
        "❌",
        ("limitations/pitfalls", "limitations / pitfalls", "limitations", "pitfalls"),
    ),
    SectionSpec(14, "comparisons", "Comparisons", "🆚", ("comparisons", "comparison")),
    SectionSpec(
        15,
        "performance",
        "Performance/Trade-offs",
        "📊",
        (
            "performance/trade-offs",
            "performance / trade-offs",
            "performance",
            "trade-offs",
            "tradeoffs",
        ),
    ),
    SectionSpec(16, "extensions", "Extension Ideas", "🚀", ("extension ideas", "extensions")),
    SectionSpec(17, "tips", "Practical Tips", "💡", ("practical tips", "tips")),
    SectionSpec(
        18, "related", "Related Concepts", "🔗", ("related concepts", "related", "related entries")
    ),
    SectionSpec(
        19,
        "follow_up",
        "Follow-up Questions",
        "❓",
        ("follow-up questions", "follow up questions", "followup questions", "open questions"),
    ),
    SectionSpec(20, "tags", "Tags", "🏷️", ("tags",)),
)

REQUIRED: tuple[SectionSpec, ...] = tuple(s for s in SECTIONS if s.required)

_VS = "\ufe0f\ufe0e"  # variation selectors: "🏷️" and "🏷" are the same emoji to a reader
_BY_EMOJI = {s.emoji.strip(_VS): s for s in SECTIONS if s.emoji}
_BY_ALIAS = {alias: s for s in SECTIONS for alias in s.aliases}
_BY_NUMBER = {s.number: s for s in SECTIONS}
_LEADING_NUMBER = re.compile(r"^(\d{1,2})[.)]\s*")


def _strip_symbols(text: str) -> str:
    """Drop emoji and other symbols (So/Sk/Cf/Mn) at the start, keep letters and punctuation."""
    i = 0
    while i < len(text) and (
        unicodedata.category(text[i]) in ("So", "Sk", "Cf", "Mn", "Cs") or text[i].isspace()
    ):
        i += 1
    return text[i:]


def identify(label: str, *, strict: bool = False) -> SectionSpec | None:
    """The section a heading or bold label names, or None for an ordinary sub-heading.

    ``label`` is the heading text without ``#`` marks (or the bold text of ``**Label**:``).
    The leading emoji decides when present; otherwise the title (before any ``:``), with an
    optional ``4.`` number in front, must equal one of the section's aliases — or, when
    ``strict`` (bold labels in running text, where ``**Math:**`` or ``**Code:**`` are often
    just labels), the section's full title.
    """
    text = label.strip().replace("*", "").replace("_", " ").strip()
    number = None
    match = _LEADING_NUMBER.match(text)
    if match:
        number = int(match.group(1))
        text = text[match.end() :]
    first = text[:1]
    if first and unicodedata.category(first) in ("So", "Sk"):
        spec = _BY_EMOJI.get(text[:2].strip(_VS)) or _BY_EMOJI.get(first)
        if spec is not None:
            return spec
    words = _strip_symbols(text)
    head = words.split(":", 1)[0].strip().lower()
    head = re.sub(r"\s+", " ", head).rstrip(" .")
    spec = _BY_ALIAS.get(head)
    if spec is not None:
        return spec if not strict or spec.required or head == spec.title.lower() else None
    if number is not None and not head:
        return _BY_NUMBER.get(number)
    return None
