"""The learning ledger (``learning_ledger.md``) as data: its lines, and views of them.

The ledger is the user's document, edited by hand between sessions. So the model is the list
of its lines, exactly as read (line endings, trailing spaces, unknown sections, stray notes),
and everything else — title, last-updated date, knowledge graph, action items, session
history, goals, insights — is a *view* computed from those lines. ``parse_ledger(t).render()
== t`` for every text ``t``; an update (:mod:`journal_agent.learning.ledger_edit`) inserts,
moves or rewrites single lines and leaves every other line where it was.

The structure it recognises is the one the user's example ledger uses::

    # <Course> Learning Ledger
    **Last Updated:** YYYY-MM-DD
    ## 🧠 Knowledge Graph (Mastery Levels)   ### 🟢 Mastered / 🟡 Developing / 🔴 Blind Spots
    ## 📉 Action Items & Review Queue        ### <horizon>, then "- [ ] item" checkboxes
    ## 📚 Session History                    | Date | Topic | Key Outcome |  (newest row bold)
    ## 🎯 Course Goals                       "- [x] goal" checkboxes
    ## 💡 Key Insights Archive               ### YYYY-MM-DD: <title>, then "> quoted insight"

Sections are recognised by emoji or by words (English or Chinese), never by exact spelling.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from journal_agent.journal._text import bare, fence_mask, split_lines
from journal_agent.learning.ledger_lines import (
    checkbox_match,
    is_bold_cell,
    is_rule,
    last_updated_match,
    split_row,
    unbold_cell,
)
from journal_agent.learning.ledger_summary import LedgerSummary  # types only: cheap to import

# -- vocabulary -------------------------------------------------------------------------------

SECTIONS = ("knowledge", "actions", "sessions", "goals", "insights")
LEVELS = ("mastered", "developing", "blind_spots")

SECTION_HEADINGS = {
    "knowledge": "## 🧠 Knowledge Graph (Mastery Levels)",
    "actions": "## 📉 Action Items & Review Queue",
    "sessions": "## 📚 Session History",
    "goals": "## 🎯 Course Goals",
    "insights": "## 💡 Key Insights Archive",
}
LEVEL_HEADINGS = {
    "mastered": "### 🟢 Mastered",
    "developing": "### 🟡 Developing",
    "blind_spots": "### 🔴 Blind Spots",
}
HORIZON_HEADINGS = {
    "immediate": "### Immediate (Next Session)",
    "short-term": "### Short-term (This Week)",
    "long-term": "### Long-term",
}
SESSION_HEADER = ("| Date | Topic | Key Outcome |", "|------|-------|-------------|")
FOOTER = (
    '*This ledger is updated at the end of each study session. Say "End Session" to generate '
    "updates.*"
)

# (emoji, words) that identify a section or a level; the first that matches wins.
_SECTION_SIGNS = {
    "knowledge": ("🧠", ("knowledge graph", "mastery", "knowledge", "知识")),
    "actions": ("📉", ("action items", "review queue", "action", "todo", "to do", "待办", "行动")),
    "sessions": ("📚", ("session history", "sessions", "history", "学习记录", "历史")),
    "goals": ("🎯", ("course goals", "goals", "目标")),
    "insights": ("💡", ("key insights", "insights", "insight", "洞见", "心得")),
}
_LEVEL_SIGNS = {
    "mastered": ("🟢", ("mastered", "掌握")),
    "developing": ("🟡", ("developing", "in progress", "进行中", "发展")),
    "blind_spots": ("🔴", ("blind spot", "blind spots", "unknowns", "gaps", "盲点", "盲区")),
}
_LEVEL_WORDS = {
    "mastered": "mastered",
    "green": "mastered",
    "🟢": "mastered",
    "developing": "developing",
    "yellow": "developing",
    "🟡": "developing",
    "blind": "blind_spots",
    "blind-spot": "blind_spots",
    "blind-spots": "blind_spots",
    "blind_spots": "blind_spots",
    "blindspots": "blind_spots",
    "red": "blind_spots",
    "🔴": "blind_spots",
}

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$")
_BULLET = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<mark>[-*+])[ \t]+(?P<text>.*)$")
# "- []", "- [ x]", "- [v]": meant as a checkbox, not one markdown renders.
_INSIGHT_HEADING = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})\s*[:：—–-]?\s*(?P<title>.*)$")
_MARKUP = re.compile(r"\*\*|__|`")


def normalize(text: str) -> str:
    """Lowercase, NFKC, markup and surrounding punctuation dropped: for matching by words."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_MARKUP.sub("", text).split())


def key_term(text: str) -> str:
    """The item's key term: its leading bold words ("**NVTX annotation**: …"), else the words
    before a trailing marker such as "*(新增)*"."""
    if text.startswith("**") and "**" in text[2:]:
        return text[2 : text.index("**", 2)].strip().rstrip(":").strip()
    return text.split(" *(")[0].strip()


def level_key(name: str) -> str | None:
    """``mastered`` / ``developing`` / ``blind_spots`` from what a user or model may write."""
    key = normalize(name).replace(" ", "-")
    if key in _LEVEL_WORDS:
        return _LEVEL_WORDS[key]
    return _identify(name, _LEVEL_SIGNS)


def _identify(title: str, signs: dict[str, tuple[str, tuple[str, ...]]]) -> str | None:
    for key, (emoji, _) in signs.items():
        if emoji in title:
            return key
    words = normalize(title)
    for key, (_, names) in signs.items():
        if any(_has_words(words, name) for name in names):
            return key
    return None


def _has_words(text: str, name: str) -> bool:
    """``name`` as whole words ("unknown" is not "known"); Chinese has no spaces: a substring."""
    if not name.isascii():
        return name in text
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


# -- views ------------------------------------------------------------------------------------


@dataclass
class Span:
    """Lines ``start`` (its heading) to ``end`` (exclusive) of a section or subsection."""

    key: str | None
    title: str
    start: int
    end: int

    @property
    def lineno(self) -> int:
        return self.start + 1


@dataclass
class Item:
    """A knowledge-graph bullet (with its indented continuation lines)."""

    level: str
    text: str
    start: int
    end: int  # exclusive: the item's own line plus its continuation lines

    @property
    def lineno(self) -> int:
        return self.start + 1


@dataclass
class Checkbox:
    """An action item or a course goal."""

    section: str  # "actions" or "goals"
    horizon: str | None  # the ### heading above an action item
    text: str
    done: bool
    index: int

    @property
    def lineno(self) -> int:
        return self.index + 1


@dataclass
class SessionRow:
    date: str
    topic: str
    outcome: str
    bold: bool
    cells: list[str]
    index: int

    @property
    def lineno(self) -> int:
        return self.index + 1


@dataclass
class Insight:
    date: str | None
    title: str
    quote: str
    start: int
    end: int  # exclusive; the block stops at the next heading or a thematic break
    text: str = ""

    @property
    def lineno(self) -> int:
        return self.start + 1


@dataclass
class Ledger:
    lines: list[str]
    title_index: int | None = None
    updated_index: int | None = None
    sections: list[Span] = field(default_factory=list)
    subsections: dict[int, list[Span]] = field(default_factory=dict)  # by section start
    _fences: list[bool] | None = field(default=None, repr=False, compare=False)
    # Kept by the edits of one batch (ledger_edit): the file's line ending, the items' words.
    _newline: str | None = field(default=None, repr=False, compare=False)
    _item_words: set[str] | None = field(default=None, repr=False, compare=False)

    # -- whole document ----------------------------------------------------------------
    def render(self) -> str:
        return "".join(self.lines)

    @property
    def newline(self) -> str:
        if self._newline is None:  # edits add lines in this style: it never changes
            crlf = sum(1 for line in self.lines if line.endswith("\r\n"))
            self._newline = "\r\n" if crlf and crlf * 2 >= len(self.lines) else "\n"
        return self._newline

    @property
    def title(self) -> str | None:
        if self.title_index is None:
            return None
        line = bare(self.lines[self.title_index]).lstrip("\ufeff")
        return m.group(2) if (m := _HEADING.match(line)) else None  # title_index: a heading

    @property
    def last_updated(self) -> str | None:
        if self.updated_index is None:
            return None
        match = last_updated_match(self.lines[self.updated_index])
        return match.group("date") if match else None

    def section(self, key: str) -> Span | None:
        return next((s for s in self.sections if s.key == key), None)

    def subsection(self, section: str, key: str) -> Span | None:
        span = self.section(section)
        if span is None:
            return None
        return next((s for s in self.subsections.get(span.start, []) if s.key == key), None)

    def fences(self) -> list[bool]:
        """For each line, whether it is inside a code block (computed once per reindex)."""
        if self._fences is None or len(self._fences) != len(self.lines):
            self._fences = fence_mask(self.lines)
        return self._fences

    # -- knowledge graph ---------------------------------------------------------------
    def items(self, level: str | None = None) -> list[Item]:
        out: list[Item] = []
        span = self.section("knowledge")
        if span is None:
            return out
        fences = self.fences()
        for sub in self.subsections.get(span.start, []):
            if sub.key is None or (level is not None and sub.key != level):
                continue
            i, stop = sub.start + 1, content_end(self, sub)
            while i < stop:
                match = _BULLET.match(bare(self.lines[i]))
                if match and not fences[i] and not checkbox_match(self.lines[i]):
                    end = i + 1
                    while end < stop and _continues(self.lines[end]) and not fences[end]:
                        end += 1
                    out.append(Item(sub.key, match.group("text").strip(), i, end))
                    i = end
                else:
                    i += 1
        return out

    # -- checkboxes --------------------------------------------------------------------
    def checkboxes(self, section: str) -> list[Checkbox]:
        span = self.section(section)
        if span is None:
            return []
        fences = self.fences()
        subs = {s.start: s for s in self.subsections.get(span.start, [])}
        horizon: str | None = None
        out = []
        for i in range(span.start + 1, span.end):
            if i in subs:
                horizon = subs[i].title
                continue
            if fences[i]:
                continue
            match = checkbox_match(self.lines[i])
            if match:
                done = match.group("state") != " "
                out.append(Checkbox(section, horizon, match.group("text").strip(), done, i))
        return out

    def horizons(self) -> list[Span]:
        span = self.section("actions")
        return self.subsections.get(span.start, []) if span else []

    # -- session history ---------------------------------------------------------------
    def sessions(self) -> list[SessionRow]:
        span = self.section("sessions")
        if span is None:
            return []
        fences = self.fences()
        rows = []
        for i in range(span.start + 1, span.end):
            line = bare(self.lines[i]).strip()
            if fences[i] or not line.startswith("|"):
                continue
            cells = split_row(line)
            if not cells or all(set(c.strip()) <= set("-: ") for c in cells):
                continue  # the separator row
            plain = [unbold_cell(c).strip() for c in cells]
            if normalize(plain[0]) in ("date", "日期"):
                continue  # the header row
            bold = all(is_bold_cell(c) for c in cells if c.strip())
            rows.append(
                SessionRow(
                    date=plain[0],
                    topic=plain[1] if len(plain) > 1 else "",
                    outcome=plain[2] if len(plain) > 2 else "",
                    bold=bold,
                    cells=cells,
                    index=i,
                )
            )
        return rows

    # -- insights ----------------------------------------------------------------------
    def insights(self) -> list[Insight]:
        span = self.section("insights")
        if span is None:
            return []
        out = []
        for sub in self.subsections.get(span.start, []):
            heading = _HEADING.match(bare(self.lines[sub.start]))
            assert heading is not None
            match = _INSIGHT_HEADING.match(heading.group(2))
            date, title = (
                (match.group("date"), match.group("title").strip())
                if match
                else (None, heading.group(2))
            )
            end = content_end(self, sub)
            quote = "\n".join(
                bare(line).lstrip()[1:].strip()
                for line in self.lines[sub.start + 1 : end]
                if bare(line).lstrip().startswith(">")
            )
            text = "".join(self.lines[sub.start : end])
            out.append(Insight(date, title, quote, sub.start, end, text))
        return out

    def summary(self) -> LedgerSummary:
        """What ``journal-agent ledger --json`` shows (without review data)."""
        items = self.items()
        actions = self.checkboxes("actions")
        goals = self.checkboxes("goals")
        return {
            "title": self.title,
            "last_updated": self.last_updated,
            "mastery": {level: [i.text for i in items if i.level == level] for level in LEVELS},
            "counts": {level: sum(1 for i in items if i.level == level) for level in LEVELS},
            "actions": [
                {"horizon": c.horizon, "text": c.text, "done": c.done, "line": c.lineno}
                for c in actions
            ],
            "sessions": [
                {"date": r.date, "topic": r.topic, "outcome": r.outcome, "line": r.lineno}
                for r in self.sessions()
            ],
            "goals": [{"text": c.text, "done": c.done, "line": c.lineno} for c in goals],
            "insights": [
                {"date": i.date, "title": i.title, "quote": i.quote, "line": i.lineno}
                for i in self.insights()
            ],
            "other_sections": [s.title for s in self.sections if s.key is None],
        }


# -- parsing ----------------------------------------------------------------------------------


def parse_ledger(text: str) -> Ledger:
    """The ledger's lines and where its parts are; never changes a byte."""
    ledger = Ledger(lines=split_lines(text))
    reindex(ledger)
    return ledger


def reindex(ledger: Ledger) -> None:
    """Recompute where the parts are (after an edit changed the lines)."""
    lines = ledger.lines
    ledger._fences = fence_mask(lines)
    heads = _headings(ledger)
    ledger.sections, ledger.subsections = [], {}
    seen: set[str] = set()
    top = [(i, t) for i, level, t in heads if level <= 2 and i != ledger.title_index]
    for n, (i, title) in enumerate(top):
        end = top[n + 1][0] if n + 1 < len(top) else len(lines)
        key = _identify(title, _SECTION_SIGNS) if _level(lines[i]) == 2 else None
        if key in seen:
            key = None  # a second "Goals" section is the user's own: kept, not edited
        if key is not None:
            seen.add(key)
        ledger.sections.append(Span(key, title, i, end))
        subs = [(j, t) for j, level, t in heads if level == 3 and i < j < end]
        ledger.subsections[i] = _subsections(key, subs, end)


def _headings(ledger: Ledger) -> list[tuple[int, int, str]]:
    """``(index, level, title)`` of every heading outside code; sets the title and the
    last-updated line (before any section) on the way."""
    ledger.title_index = ledger.updated_index = None
    fences = ledger.fences()
    heads: list[tuple[int, int, str]] = []
    for i, line in enumerate(ledger.lines):
        if i == 0:
            line = line.lstrip("\ufeff")  # a byte-order mark does not hide the title
        if fences[i] or not line.lstrip(" ").startswith(("#", "*")):
            continue
        text = bare(line)
        heading = _HEADING.match(text)
        if heading:
            heads.append((i, len(heading.group(1)), heading.group(2)))
            if len(heading.group(1)) == 1 and ledger.title_index is None:
                ledger.title_index = i
        elif (
            ledger.updated_index is None
            and last_updated_match(text)
            and all(level == 1 for _, level, _ in heads)
        ):
            ledger.updated_index = i
    return heads


def _subsections(key: str | None, subs: list[tuple[int, str]], end: int) -> list[Span]:
    """The ``###`` parts of a section: mastery levels (the first of each), action horizons,
    archived insights; in other sections they are the user's own (no key)."""
    spans = []
    seen: set[str] = set()
    for m, (j, title) in enumerate(subs):
        sub_end = subs[m + 1][0] if m + 1 < len(subs) else end
        sub_key: str | None = None
        if key == "knowledge":
            sub_key = _identify(title, _LEVEL_SIGNS)
            if sub_key in seen:
                sub_key = None
            if sub_key:
                seen.add(sub_key)
        elif key in ("actions", "insights"):
            sub_key = "horizon" if key == "actions" else "insight"
        spans.append(Span(sub_key, title, j, sub_end))
    return spans


def _level(line: str) -> int:
    heading = _HEADING.match(bare(line))
    return len(heading.group(1)) if heading else 0


def _continues(line: str) -> bool:
    """An indented line under a bullet (a sub-bullet or a wrapped explanation)."""
    text = bare(line)
    return bool(text.strip()) and text[:1] in (" ", "\t") and len(text) - len(text.lstrip()) >= 2


def content_end(ledger: Ledger, span: Span) -> int:
    """Where a (sub)section's own content ends: before a thematic break (``---``) that
    follows it and before the blank lines in front of that break or of the next heading."""
    end = span.end
    fences = ledger.fences()
    for i in range(span.start + 1, span.end):
        if not fences[i] and is_rule(ledger.lines[i]):
            end = i
            break
    while end > span.start + 1 and not ledger.lines[end - 1].strip():
        end -= 1
    return end
