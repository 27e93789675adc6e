"""Parsing and rendering: byte-for-byte round trips, tolerant sections, ids, refs, tags."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from journal_agent.journal._text import fence_mask, split_lines
from journal_agent.journal.model import entry_heading, parse_journal
from journal_agent.journal.sections import REQUIRED, SECTIONS, identify
from journal_agent.journal.store import HEADER

from .conftest import make_entry

HAND_EDITED = (
    "\ufeff# Learning Journal\r\n"
    "\r\n"
    "My own notes   \r\n"
    "<!-- a comment we do not understand -->\r\n"
    "---\r\n"
    "## ZeRO Stage 2 (2026-11-21)  \r\n"
    "**Context**: studying\tDeepSpeed\r\n"
    "\r\n"
    "```markdown\r\n"
    "## Not an entry (2026-01-01)\r\n"
    "```\r\n"
    "## 机制 与 显存 — 2026-11-22\n"
    "text without final newline"
)


def test_round_trip_keeps_every_byte_of_a_hand_edited_journal():
    journal = parse_journal(HAND_EDITED)
    assert journal.render() == HAND_EDITED
    assert [e.title for e in journal.entries] == ["ZeRO Stage 2", "机制 与 显存"]
    assert journal.entries[1].start_line == 12
    # The heading inside the code block is example text, not an entry.
    assert "Not an entry" in journal.entries[0].raw


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "## T (2026-11-21)\n",
                "# X (2026-01-02)\r\n",
                "```\n",
                "````\n",
                "~~~ python\n",
                "    ```\n",
                "``` \r\n",
                "  ## T (2026-11-22)\n",
                "##\tTabbed 2026-11-23\n",
                "### 🎯 Intuition\n",
                "**Context**: c\n",
                "text 14 GB\n",
                "\r\n",
                "\n",
                " \t \n",
                "<!-- entry: a -->\n",
                "机制 🔍 \u2028 \x0c\n",
                "no newline",
                "\ufeff",
            ]
        ),
        max_size=30,
    ).map("".join)
    | st.text(max_size=200)
)
def test_any_text_round_trips(text: str):
    journal = parse_journal(text)
    assert journal.render() == text
    # The one-pass parser finds the same entries as a plain line-by-line reading would.
    lines = split_lines(text.removeprefix("\ufeff"))
    mask = fence_mask(lines)
    expected = [(i + 1, entry_heading(line)) for i, line in enumerate(lines) if not mask[i]]
    expected = [(n, h) for n, h in expected if h]
    assert [(e.start_line, (e.title, e.date)) for e in journal.entries] == expected


def test_sections_are_found_by_emoji_number_or_title():
    body = (
        "\n## 🔍 Key insights\n- one\n"
        "\n#### 6. 🧮 Mathematical Explanation:\nx\n"
        "\n### Comparison: DeepSpeed Stages\n| a |\n"
        "\n**📊 Performance/Trade-offs**:\ny\n"
        "\n### ⚠️ The Core Problem\nnot a section of its own\n"
        "\n### ❓ Follow up questions\n- why?\n"
    )
    entry = parse_journal(HEADER + "\n" + make_entry(body=body)).entries[0]
    keys = entry.section_keys()
    for key in ("header", "context", "key_question", "intuition", "key_insights", "math"):
        assert key in keys
    assert {"comparisons", "performance", "follow_up", "tags"} <= keys
    # An unknown sub-heading stays inside the section before it.
    assert "The Core Problem" in entry.section_text("performance")


def test_identify_is_tolerant_and_strict_enough():
    assert identify("🏷 Tags").key == "tags"  # without the variation selector
    assert identify("12. ✅ What Works Well").key == "works_well"
    assert identify("The Key Question I Had").key == "key_question"
    assert identify("Memory Layout Comparison") is None
    # In running text "**Math:**" is a label of the 4-representations pattern, not a section.
    assert identify("Math", strict=True) is None and identify("Math").key == "math"
    assert identify("Context", strict=True).key == "context"
    assert identify("🧮 Math", strict=True).key == "math"
    assert [s.key for s in REQUIRED] == ["header", "context", "key_question"]
    assert len(SECTIONS) == 20


def test_ids_come_from_the_comment_or_title_and_date():
    text = (
        HEADER
        + "\n## Renamed by hand (2026-11-21)\n<!-- entry: zero-stage-2-2026-11-21 -->\nx\n"
        + "\n## Same Title (2026-11-21)\nx\n\n## Same Title (2026-11-21)\ny\n"
    )
    ids = [e.id for e in parse_journal(text).entries]
    assert ids == ["zero-stage-2-2026-11-21", "same-title-2026-11-21", "same-title-2026-11-21-2"]


def test_refs_citations_and_tags():
    body = (
        "See `src/train.py:10-12` and src/model.py:7, not example.com:443 or 12:30.\n"
        "Peak 71.7 GiB [m:est-0000abcd].\n"
        "```\nignored.py:3 #notatag\n```\n"
    )
    entry = parse_journal(make_entry(body=body, tags="#zero, #memory-optimization")).entries[0]
    assert [(r.path, r.start, r.end) for r in entry.refs] == [
        ("src/train.py", 10, 12),
        ("src/model.py", 7, 7),
    ]
    assert [c.record_id for c in entry.citations] == ["est-0000abcd"]
    assert entry.tags == ["zero", "memory-optimization"]


def test_an_entry_with_all_twenty_sections_in_the_users_style():
    body = "## ZeRO Stage 2 (2026-11-21)\n\n**Context**: c\n\n**The Key Question I Had**: *q*\n\n"
    body += "### ⚠️ The Core Problem: Memory Bottleneck\n```\nTotal: 99 GB per GPU\n```\n\n"
    for spec in SECTIONS[3:]:
        body += f"### {spec.emoji} {spec.title}\ntext\n\n"
    body += "### 🆚 Scaling Analysis\nmore\n"
    entry = parse_journal(body).entries[0]
    assert entry.section_keys() == {s.key for s in SECTIONS}
    assert "Scaling Analysis" in entry.section_text("comparisons")
    assert "The Core Problem" in entry.section_text("key_question")
