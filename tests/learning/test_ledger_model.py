"""The ledger model: the user's ledger (and any hand-edited one) parses and renders back byte
for byte, and the views read what the user wrote."""

from __future__ import annotations

from journal_agent.learning.ledger import parse_ledger
from tests.learning.learning_helpers import SEED_LEDGER


def test_the_seed_ledger_round_trips_byte_for_byte():
    data = SEED_LEDGER.read_bytes()
    assert parse_ledger(data.decode("utf-8")).render().encode("utf-8") == data


def test_the_seed_ledger_reads_as_its_author_wrote_it(seed_text):
    ledger = parse_ledger(seed_text)
    assert ledger.title == "CS336 Learning Ledger"
    assert ledger.last_updated == "2026-01-31"
    counts = ledger.summary()["counts"]
    assert counts == {"mastered": 12, "developing": 10, "blind_spots": 7}
    blind = [i.text for i in ledger.items("blind_spots")]
    assert blind[0] == "Slurm 集群环境下的 GPU 分配与隔离策略"
    actions = ledger.checkboxes("actions")
    assert [a.done for a in actions[:4]] == [True, True, True, False]
    assert {a.horizon for a in actions} == {
        "Immediate (Next Session)",
        "Short-term (This Week)",
        "Long-term (Before Assignment Due)",
    }
    rows = ledger.sessions()
    assert [(r.date, r.bold) for r in rows] == [
        ("2026-01-30", False),
        ("2026-01-30", False),
        ("2026-01-31", True),
    ]
    assert rows[-1].topic == "Nsys Profiling & Kernel Analysis"
    assert [g.done for g in ledger.checkboxes("goals")] == [True, True, False, False, False]
    insights = ledger.insights()
    assert [i.title for i in insights] == [
        "FLOPs ≠ Runtime",
        "Backward uses smaller tiles",
        "Memory-bound to Compute-bound transition",
    ]
    assert insights[0].quote.startswith('"Softmax has ~100x fewer FLOPs')
    # The closing line is not part of the last insight.
    assert "End Session" not in insights[-1].text


HAND_EDITED = (
    "\ufeff# My Ledger  \r\n"
    "**Last Updated:** 2026-03-01\r\n"
    "\r\n"
    "Some free text the user wrote, with trailing spaces   \r\n"
    "## 🗒️ Reading list\r\n"
    "- a paper\r\n"
    "## 🧠 Knowledge\r\n"
    "### 🟢 Mastered\r\n"
    "- **A**: explained\r\n"
    "    wrapped explanation line\r\n"
    "<!-- a comment -->\r\n"
    "### 🤔 Maybe\r\n"
    "- not a level\r\n"
    "```\r\n"
    "## not a heading inside code\r\n"
    "```\r\n"
    "| stray | table |\r\n"
    "no final newline"
)


def test_a_hand_edited_ledger_round_trips_and_unknown_parts_stay_unknown():
    ledger = parse_ledger(HAND_EDITED)
    assert ledger.render() == HAND_EDITED
    assert [s.key for s in ledger.sections] == [None, "knowledge"]
    # The wrapped line belongs to its item; the unknown "Maybe" list is not a mastery level.
    items = ledger.items()
    assert [(i.text, i.end - i.start) for i in items] == [("**A**: explained", 2)]
    assert ledger.newline == "\r\n"
    assert ledger.title == "My Ledger" and ledger.last_updated == "2026-03-01"  # after a BOM
