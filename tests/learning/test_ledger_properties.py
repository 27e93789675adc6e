"""Property-based: any text round-trips; random ledgers under random update sequences keep
every line a person wrote (a ticked box, an un-bolded session row and the last-updated date are
the only rewrites an update makes, and a moved item keeps its words)."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_agent.learning import ledger_edit as edit
from journal_agent.learning.ledger import parse_ledger

WORDS = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    ),
    max_size=24,
)
SAFE = st.text(alphabet="abcdefgh xyz中文🟢*|`#-[]>", min_size=1, max_size=16)
DATES = st.dates().map(lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}")
HEADINGS = [
    "# CS336 Learning Ledger",
    "**Last Updated:** 2026-01-31",
    "## 🧠 Knowledge Graph (Mastery Levels)",
    "### 🟢 Mastered",
    "### 🟡 Developing",
    "### 🔴 Blind Spots",
    "## 📉 Action Items & Review Queue",
    "### Immediate (Next Session)",
    "### Short-term (This Week)",
    "## 📚 Session History",
    "| Date | Topic | Key Outcome |",
    "|------|-------|-------------|",
    "## 🎯 Course Goals",
    "## 💡 Key Insights Archive",
    "## 🗒️ My own section",
    "### a note",
    "---",
    "```",
    "",
    '*This ledger is updated at the end of each study session. Say "End Session" to generate '
    "updates.*",
]
LINE = st.one_of(
    st.sampled_from(HEADINGS),
    WORDS,
    SAFE.map(lambda t: f"- {t}"),
    SAFE.map(lambda t: f"- **{t}**: explained *(新增)*"),
    SAFE.map(lambda t: f"  - sub point {t}"),
    SAFE.map(lambda t: f"- [ ] {t}"),
    SAFE.map(lambda t: f"- [x] {t}"),
    st.tuples(DATES, SAFE, SAFE).map(lambda r: f"| {r[0]} | {r[1]} | {r[2]} |"),
    st.tuples(DATES, SAFE, SAFE).map(lambda r: f"| **{r[0]}** | **{r[1]}** | **{r[2]}** |"),
    st.tuples(DATES, SAFE).map(lambda r: f"### {r[0]}: {r[1]}"),
    SAFE.map(lambda t: f'> "{t}"'),
)


@st.composite
def ledgers(draw) -> str:
    lines = draw(st.lists(LINE, max_size=40))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    end = draw(st.sampled_from(["", newline]))
    return newline.join(lines) + (end if lines else "")


OPS = st.one_of(
    st.tuples(st.just("session"), DATES, SAFE, SAFE),
    st.tuples(st.just("insight"), DATES, SAFE, SAFE),
    st.tuples(st.just("add_item"), st.sampled_from(["mastered", "developing", "blind"]), SAFE),
    st.tuples(
        st.just("move"), st.integers(0, 50), st.sampled_from(["mastered", "developing", "blind"])
    ),
    st.tuples(st.just("action"), st.sampled_from(["immediate", "short-term", "long-term"]), SAFE),
    st.tuples(st.just("tick"), st.sampled_from(["actions", "goals"]), st.integers(0, 50)),
    st.tuples(st.just("goal"), SAFE),
    st.tuples(st.just("updated"), DATES),
)


def _apply(ledger, op) -> None:
    kind, *args = op
    if kind == "session":
        edit.add_session(ledger, args[0], args[1], args[2])
    elif kind == "insight":
        edit.archive_insight(ledger, args[0], args[1], args[2], [])
    elif kind == "add_item":
        edit.add_item(ledger, args[0], args[1])
    elif kind == "move":  # an item the ledger has, named by its words
        items = ledger.items()
        match = items[args[0] % len(items)].text if items else "nothing"
        edit.move_item(ledger, match, args[1])
    elif kind == "action":
        edit.add_action(ledger, args[0], args[1])
    elif kind == "tick":
        boxes = ledger.checkboxes(args[0])
        edit.tick(ledger, args[0], boxes[args[1] % len(boxes)].text if boxes else "nothing")
    elif kind == "goal":
        edit.add_goal(ledger, args[0])
    else:
        edit.set_updated(ledger, args[0])


_BOX = re.compile(r"^([ \t]{0,3}[-*+][ \t]+\[)[ xX](\])")
_BOLD_CELL = re.compile(r"(?<=\|)(\s*)\*\*(.*?\S.*?)\*\*(\s*)(?=\|)")


def _canon(text: str) -> Counter:
    """Lines as a person wrote them, with the rewrites an update may make undone."""
    out: Counter = Counter()
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if "Last Updated" in line:
            continue  # the date an update stamps
        line = _BOX.sub(r"\1 \2", line)
        if line.lstrip().startswith("|"):
            line = _BOLD_CELL.sub(r"\1\2\3", line)
        out[line] += 1
    return out


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_any_text_round_trips(text):
    assert parse_ledger(text).render() == text


@given(ledgers())
@settings(max_examples=200, deadline=None)
def test_random_ledgers_round_trip(text):
    assert parse_ledger(text).render() == text


@given(ledgers(), st.lists(OPS, min_size=1, max_size=8))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_updates_keep_every_line_a_person_wrote(text, ops):
    ledger = parse_ledger(text)
    for op in ops:
        before = ledger.render()
        try:
            _apply(ledger, op)
        except edit.LedgerError:
            ledger = parse_ledger(before)  # the store writes nothing on an error
            continue
        after = ledger.render()
        assert parse_ledger(after).render() == after
        missing = _canon(before) - _canon(after)
        assert not missing, f"{op} lost {list(missing)}"
        if op[0] == "session":
            assert any(r.date == op[1] for r in parse_ledger(after).sessions())
        if op[0] == "add_item":
            assert any(i.text == " ".join(op[2].split()) for i in parse_ledger(after).items())
