"""Updates to a parsed ledger, each touching as few lines as it can.

Every operation inserts new lines, moves one item's lines, or rewrites one line (a checkbox
ticked, the previous newest session row un-bolded, the last-updated date); every other line
stays byte for byte where it was. A part the ledger lacks (a section, a mastery level, an action
horizon) is created in the example ledger's order and style. Operations are pure: they change
the :class:`Ledger` in memory; :mod:`journal_agent.learning.ledger_store` writes it.
"""

from __future__ import annotations

import re
from datetime import date as _date

from journal_agent.errors import UserError
from journal_agent.journal._text import open_fence
from journal_agent.learning.ledger import (
    FOOTER,
    HORIZON_HEADINGS,
    LEVEL_HEADINGS,
    LEVELS,
    SECTION_HEADINGS,
    SECTIONS,
    SESSION_HEADER,
    Checkbox,
    Item,
    Ledger,
    Span,
    content_end,
    key_term,
    level_key,
    normalize,
    reindex,
)
from journal_agent.learning.ledger_lines import (
    checkbox_match,
    is_date,
    is_rule,
    last_updated_match,
    unbold_row,
)

LEVEL_NAMES = {
    "mastered": "🟢 Mastered",
    "developing": "🟡 Developing",
    "blind_spots": "🔴 Blind Spots",
}


class LedgerError(UserError):
    """An update that cannot be applied as asked (no such item, ambiguous match, bad date)."""


def new_ledger(title: str = "Learning Ledger", day: str | None = None, newline: str = "\n") -> str:
    """A ledger with every section of the example, empty, in its order and style."""
    day = day or _date.today().isoformat()
    heading = title if title.lower().endswith("ledger") else f"{title} Learning Ledger"
    parts = [f"# {heading}", f"**Last Updated:** {day}", "", "---", ""]
    for key in SECTIONS:
        parts.append(SECTION_HEADINGS[key])
        if key == "knowledge":
            for level in LEVELS:
                parts += ["", LEVEL_HEADINGS[level]]
        elif key == "actions":
            for heading_line in HORIZON_HEADINGS.values():
                parts += ["", heading_line]
        elif key == "sessions":
            parts += ["", *SESSION_HEADER]
        parts += ["", "---", ""]
    parts.append(FOOTER)
    return newline.join(parts) + newline


# -- line helpers ---------------------------------------------------------------------------


def _insert(ledger: Ledger, at: int, texts: list[str]) -> int:
    """Insert lines before line index ``at``; returns where the first of them went."""
    nl = ledger.newline
    if at > 0 and not ledger.lines[at - 1].endswith("\n"):
        ledger.lines[at - 1] += nl  # the file did not end with a newline
    fences = ledger.fences()
    # Outside code (the line before is not in a block, fence lines included) nothing is open.
    unclosed = open_fence(ledger.lines[:at]) if at > 0 and fences[at - 1] else None
    if unclosed:
        # A code block left open to the end would swallow what we add: close it first.
        texts = [unclosed, *texts]
    ledger.lines[at:at] = [t + nl for t in texts]
    if unclosed or any(t.lstrip(" ").startswith(_STRUCTURE) for t in texts):
        reindex(ledger)  # a heading or a fence: where the parts are changes
    else:
        _shift(ledger, at, len(texts))
    return at + (1 if unclosed else 0)


# A line that starts with one of these may be a heading, the Last Updated line or a fence.
_STRUCTURE = ("#", "*", "`", "~", "\ufeff")


def _shift(ledger: Ledger, at: int, k: int) -> None:
    """The index after inserting ``k`` plain lines (no heading, no fence) before ``at``, in
    time linear in the sections rather than the lines: a batch of operations stays linear."""

    def moved(span: Span) -> Span:
        if span.start >= at:
            return Span(span.key, span.title, span.start + k, span.end + k)
        return Span(span.key, span.title, span.start, span.end + (k if span.end >= at else 0))

    ledger.sections = [moved(s) for s in ledger.sections]
    ledger.subsections = {
        (start + k if start >= at else start): [moved(s) for s in subs]
        for start, subs in ledger.subsections.items()
    }
    for name in ("title_index", "updated_index"):
        index = getattr(ledger, name)
        if index is not None and index >= at:
            setattr(ledger, name, index + k)
    if ledger._fences is not None:
        ledger._fences[at:at] = [False] * k


def _replace(ledger: Ledger, index: int, text: str) -> None:
    old = ledger.lines[index]
    ending = old[len(old.rstrip("\r\n")) :]
    ledger.lines[index] = text + ending
    if old.lstrip(" ").startswith(_STRUCTURE) or text.lstrip(" ").startswith(_STRUCTURE):
        reindex(ledger)  # a plain line for a plain line changes where nothing is


def _clean(text: str, what: str) -> str:
    text = " ".join(text.split())
    if not text:
        raise LedgerError(f"the {what} is empty; give its text.")
    return text


def _day(day: str | None) -> str:
    if day is None:
        return _date.today().isoformat()
    if not is_date(day):
        raise LedgerError(f"{day!r} is not a date; write it as YYYY-MM-DD.")
    try:
        _date.fromisoformat(day)
    except ValueError:
        raise LedgerError(f"{day!r} is not a calendar date; write it as YYYY-MM-DD.") from None
    return day


# -- finding or creating the parts ----------------------------------------------------------


def ensure_section(ledger: Ledger, key: str) -> Span:
    """The section, created (with its empty parts) before the next section in the example's
    order, or before the closing rule and footer, when the ledger has none."""
    span = ledger.section(key)
    if span is not None:
        return span
    body = [SECTION_HEADINGS[key]]
    if key == "sessions":
        body += ["", *SESSION_HEADER]
    later = [ledger.section(k) for k in SECTIONS[SECTIONS.index(key) + 1 :]]
    following = next((s for s in later if s is not None), None)
    if following is not None:
        _insert(ledger, following.start, [*body, "", "---", ""])
    else:
        at = _tail_start(ledger)
        if at < len(ledger.lines):  # before the closing rule and footer
            _insert(ledger, at, ["---", "", *body, ""])
        else:
            filled = [line for line in ledger.lines if line.strip()]
            lead: list[str] = []
            if filled:
                lead = [""] if is_rule(filled[-1]) else ["", "---", ""]
                if not ledger.lines[-1].strip():
                    lead = lead[1:]
            _insert(ledger, at, [*lead, *body])
    span = ledger.section(key)
    assert span is not None
    return span


def _tail_start(ledger: Ledger) -> int:
    """Where new trailing sections go: before the closing ``---`` + footer line, if any."""
    i = len(ledger.lines)
    while i > 0 and not ledger.lines[i - 1].strip():
        i -= 1
    if i == 0:
        return 0
    last = ledger.lines[i - 1].strip()
    if last.startswith("*") and last.endswith("*") and not last.startswith("**"):
        j = i - 1
        while j > 0 and not ledger.lines[j - 1].strip():
            j -= 1
        if j > 0 and is_rule(ledger.lines[j - 1]):
            return j - 1
    return len(ledger.lines)


def ensure_level(ledger: Ledger, level: str) -> Span:
    span = ledger.subsection("knowledge", level)
    if span is not None:
        return span
    section = ensure_section(ledger, "knowledge")
    later = [ledger.subsection("knowledge", k) for k in LEVELS[LEVELS.index(level) + 1 :]]
    following = next((s for s in later if s is not None), None)
    if following is not None:
        _insert(ledger, following.start, [LEVEL_HEADINGS[level], ""])
    else:
        _insert(ledger, content_end(ledger, section), ["", LEVEL_HEADINGS[level]])
    span = ledger.subsection("knowledge", level)
    assert span is not None
    return span


def find_horizon(ledger: Ledger, name: str) -> Span:
    """An action horizon by words of its heading ("immediate", "short-term", "This Week"),
    created in the example's style for the three usual ones."""
    wanted = normalize(name)
    horizons = ledger.horizons()
    hits = [h for h in horizons if wanted and wanted in normalize(h.title)]
    if not hits:  # "short term" for "Short-term (This Week)"
        squash = wanted.replace("-", " ")
        hits = [h for h in horizons if squash and squash in normalize(h.title).replace("-", " ")]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        names = "; ".join(h.title for h in hits)
        raise LedgerError(f"{len(hits)} action horizons match {name!r} ({names}); be more exact.")
    key = wanted.replace(" ", "-")
    heading = HORIZON_HEADINGS.get(key)
    if heading is None:
        heading = f"### {' '.join(name.split())}"
    section = ensure_section(ledger, "actions")
    _insert(ledger, content_end(ledger, section), ["", heading])
    return next(h for h in ledger.horizons() if f"### {h.title}" == heading)


def _pick(candidates: list, text_of, match: str, what: str, listing: str):
    wanted = normalize(match)
    if not wanted:
        raise LedgerError(f"give some words of the {what} to find it.")
    # Best first: the whole text, then the key term ("**Term**: …"), then a part of the text.
    for tier in (
        lambda c: normalize(text_of(c)) == wanted,
        lambda c: normalize(key_term(text_of(c))) == wanted,
    ):
        exact = [c for c in candidates if tier(c)]
        if len(exact) == 1:
            return exact[0]
    hits = [c for c in candidates if wanted in normalize(text_of(c))]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise LedgerError(f"no {what} matches {match!r}; {listing} lists them.")
    shown = "; ".join(text_of(c)[:60] for c in hits[:5])
    raise LedgerError(
        f"{len(hits)} {what}s match {match!r} ({shown}); give more of its words to pick one."
    )


# -- the operations -------------------------------------------------------------------------


def set_updated(ledger: Ledger, day: str | None = None) -> None:
    """Write ``**Last Updated:** <day>`` (keeping the line's own wording), or add it under the
    title when the ledger has none."""
    day = _day(day)
    if ledger.updated_index is not None:
        line = ledger.lines[ledger.updated_index]
        match = last_updated_match(line)
        assert match is not None
        text = line.rstrip("\r\n")
        if match.group("date"):
            new = text[: match.start("date")] + day + text[match.end("date") :]
        else:
            new = text[: match.end()].rstrip() + " " + day + text[match.end() :]
        if new != text:
            _replace(ledger, ledger.updated_index, new)
        return
    at = ledger.title_index + 1 if ledger.title_index is not None else 0
    if at == 0 and ledger.lines and ledger.lines[0].startswith("\ufeff"):
        at = 1  # never push the byte-order mark off the first line
    _insert(ledger, at, [f"**Last Updated:** {day}"])


def add_item(ledger: Ledger, level: str, text: str) -> Item:
    """A new knowledge-graph item at the end of its mastery level."""
    key = _level(level)
    text = _clean(text, "item")
    sub = ensure_level(ledger, key)
    if ledger._item_words is None:  # once per batch; kept current below
        ledger._item_words = {normalize(i.text) for i in ledger.items()}
    words = normalize(text)
    existing = []
    if words in ledger._item_words:
        existing = [i for i in ledger.items() if normalize(i.text) == words]
    if existing:
        where = LEVEL_NAMES[existing[0].level]
        raise LedgerError(
            f"the knowledge graph already has {text!r} (under {where}, line "
            f"{existing[0].lineno}); move it instead of adding it twice."
        )
    line = f"- {text}"
    if is_rule(line) or checkbox_match(line):
        raise LedgerError(
            f"the item {text!r} would read as a rule or a checkbox in markdown; reword it."
        )
    at = _insert(ledger, content_end(ledger, sub), [line])
    ledger._item_words.add(words)
    return Item(key, text, at, at + 1)


def move_item(ledger: Ledger, match: str, level: str, text: str | None = None) -> Item:
    """Move an item (its line and indented continuation lines) to the end of another level;
    ``text`` rewrites the item's words (the bullet and continuation lines are kept)."""
    key = _level(level)
    ledger._item_words = None  # the words may change: add_item gathers them again
    item = _pick(
        ledger.items(), lambda i: i.text, match, "knowledge item", "`journal-agent ledger`"
    )
    block = ledger.lines[item.start : item.end]
    if text is not None:
        first = block[0]
        body = first.rstrip("\r\n")
        bullet = re.match(r"^[ \t]{0,3}[-*+][ \t]+", body)
        prefix = bullet.group(0) if bullet else "- "
        block[0] = prefix + _clean(text, "item") + first[len(body) :]
    if item.level == key:
        if text is not None:
            ledger.lines[item.start : item.end] = block
            reindex(ledger)
        return next(i for i in ledger.items(key) if i.start == item.start)
    if not block[-1].endswith("\n"):
        block[-1] += ledger.newline  # it was the file's last line
    del ledger.lines[item.start : item.end]
    reindex(ledger)
    sub = ensure_level(ledger, key)
    at = content_end(ledger, sub)
    if at > 0 and not ledger.lines[at - 1].endswith("\n"):
        ledger.lines[at - 1] += ledger.newline
    unclosed = open_fence(ledger.lines[:at])
    if unclosed:  # as in _insert: an open code block would swallow the item
        block = [unclosed + ledger.newline, *block]
    ledger.lines[at:at] = block
    reindex(ledger)
    at += 1 if unclosed else 0
    return next(i for i in ledger.items(key) if i.start == at)


def add_action(ledger: Ledger, horizon: str, text: str) -> Checkbox:
    text = _clean(text, "action item")
    span = find_horizon(ledger, horizon)
    at = _insert(ledger, content_end(ledger, span), [f"- [ ] {text}"])
    return next(c for c in ledger.checkboxes("actions") if c.index == at)


def add_goal(ledger: Ledger, text: str) -> Checkbox:
    text = _clean(text, "goal")
    span = ensure_section(ledger, "goals")
    at = _insert(ledger, content_end(ledger, span), [f"- [ ] {text}"])
    return next(c for c in ledger.checkboxes("goals") if c.index == at)


def tick(ledger: Ledger, section: str, match: str, note: str | None = None) -> Checkbox:
    """Tick an action item (``section="actions"``) or a goal; ``note`` is appended, e.g.
    ``*(完成)*``. Ticking a ticked box changes nothing."""
    what = "action item" if section == "actions" else "goal"
    box = _pick(ledger.checkboxes(section), lambda c: c.text, match, what, "`journal-agent ledger`")
    line = ledger.lines[box.index].rstrip("\r\n")
    m = checkbox_match(line)
    assert m is not None
    if box.done and not note:
        return box
    new = m.group("head") + ("x" if not box.done else m.group("state")) + line[m.end("state") :]
    if note:
        new = new.rstrip() + " " + " ".join(note.split())
    _replace(ledger, box.index, new)
    return next(c for c in ledger.checkboxes(section) if c.index == box.index)


def _cell(text: str, what: str) -> str:
    return _clean(text, what).replace("|", "\\|")


def add_session(ledger: Ledger, day: str | None, topic: str, outcome: str) -> int:
    """A session-history row, in date order. When it is the newest, it is bold and the rows
    bold before it are made plain (the example's convention); a row for an earlier date goes
    in its place, plain, and no other row changes. Returns the row's line number."""
    day = _day(day)
    cells = [day, _cell(topic, "session topic"), _cell(outcome, "session's key outcome")]
    span = ensure_section(ledger, "sessions")
    rows = ledger.sessions()
    if not rows and not any(
        ledger.lines[i].lstrip().startswith("|") for i in range(span.start, span.end)
    ):
        _insert(ledger, content_end(ledger, span), ["", *SESSION_HEADER])
        span = ledger.section("sessions")
        assert span is not None
        rows = ledger.sessions()
    table = [i for i in range(span.start + 1, span.end) if ledger.lines[i].lstrip().startswith("|")]
    after = [r for r in rows if not is_date(r.date) or r.date <= day]
    if after:
        at = after[-1].index + 1
    elif rows:
        at = rows[0].index  # older than every row: it goes first
    else:
        at = table[-1] + 1
    newest = all(not is_date(r.date) or r.date <= day for r in rows)
    if newest:
        for row in rows:
            if row.bold:
                _replace(ledger, row.index, unbold_row(ledger.lines[row.index]).rstrip("\r\n"))
        cells = [f"**{c}**" for c in cells]
    return _insert(ledger, at, ["| " + " | ".join(cells) + " |"]) + 1


def entry_ref(entry_id: str) -> str:
    """How the ledger names a journal entry: ``[entry:<id>]`` (``ledger check`` resolves it)."""
    return f"[entry:{entry_id}]"


_SOURCE = re.compile(r"^\[?(?:(?P<m>m):(?P<mid>[^\]\s]+)|(?:entry:)?(?P<eid>[^\[\]\s]+))\]?$")


def source_ref(source: str) -> str:
    """``[m:<id>]`` for a measurement record, ``[entry:<id>]`` for a journal entry."""
    match = _SOURCE.match(source.strip())
    if not match:
        raise LedgerError(
            f"{source!r} is not a source; give a measurement as m:<id> or a journal entry's id."
        )
    if match.group("m"):
        from profiling.citations import cite

        return cite(match.group("mid"))
    return entry_ref(match.group("eid"))


def archive_insight(
    ledger: Ledger, day: str | None, title: str, quote: str, sources: list[str]
) -> int:
    """``### <day>: <title>`` with the insight quoted and its sources on the last quoted line,
    after the last archived insight. Returns the heading's line number."""
    day = _day(day)
    title = _clean(title, "insight title")
    lines = [" ".join(line.split()) for line in quote.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise LedgerError("the insight is empty; give the insight in one to three sentences.")
    if not lines[0].startswith(('"', "“", "「")):
        lines[0] = '"' + lines[0]
        lines[-1] = lines[-1] + '"'
    refs = [source_ref(s) for s in sources]
    if refs:
        lines[-1] += " — " + ", ".join(refs)
    span = ensure_section(ledger, "insights")
    archived = ledger.insights()
    at = archived[-1].end if archived else content_end(ledger, span)
    at = _insert(ledger, at, ["", f"### {day}: {title}", *(f"> {line}" for line in lines)])
    return at + 2


def _level(level: str) -> str:
    key = level_key(level)
    if key is None:
        raise LedgerError(
            f"{level!r} is not a mastery level; use mastered (🟢), developing (🟡) or blind (🔴)."
        )
    return key
