"""What a search returns (``Hit``), a word match before ranking (``Lexical``), and the small
text helpers both the index and near-duplicate detection use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from journal_agent.journal.search.query import stems

# Words every entry has (section titles, the user's headings) or that say nothing of its topic:
# never "telling" terms of a draft.
_TEMPLATE_WORDS = frozenset(
    """the and for with that this from are was were has have had not but you your can will
    into its than then them they their there what when which who why how all any each
    more most other some such only own same very just also use used using one two per
    via like about after before over under between does did doing been being would could
    should example examples section sections key question context intuition insights mathematical
    explanation code analogy toy diagrams communication flow works well limitations pitfalls
    comparisons performance trade offs extension ideas practical tips related concepts
    follow questions tags entry header had""".split(),  # noqa: SIM905
)
SNIPPET_WORDS = 14


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    date: str
    line: int
    score: float
    snippet: str
    matched: tuple[str, ...] = ()  # the query's words this entry contains (or a synonym)
    meaning: float | None = None  # cosine similarity of meaning, when embeddings are on

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "date": self.date,
            "line": self.line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "matched": list(self.matched),
            "meaning": None if self.meaning is None else round(self.meaning, 3),
        }


@dataclass
class Lexical:
    rowid: int
    bm25: float  # FTS5's bm25(): lower is better
    matched: list[str] = field(default_factory=list)


def useful(word: str) -> bool:
    global _TEMPLATE_STEMS
    if _TEMPLATE_STEMS is None:
        _TEMPLATE_STEMS = frozenset(stems(" ".join(_TEMPLATE_WORDS)))
    return len(word) >= 3 and not word.isdigit() and word not in _TEMPLATE_STEMS


_TEMPLATE_STEMS: frozenset[str] | None = None


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()
