"""Updates through the safe API: each changes what it says and keeps every other line."""

from __future__ import annotations

import pytest

from journal_agent.learning import ledger_edit as edit
from journal_agent.learning.ledger import parse_ledger
from journal_agent.learning.ledger_check import check_ledger


def _diff(before: str, after: str) -> tuple[list[str], list[str]]:
    import difflib

    added, removed = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("+ "):
            added.append(line[2:])
        elif line.startswith("- "):
            removed.append(line[2:])
    return added, removed


def test_a_session_row_is_added_bold_and_the_previous_newest_unbolded(seed_text):
    ledger = parse_ledger(seed_text)
    edit.add_session(ledger, "2026-02-01", "FlashAttention | tiling", "Wrote the kernel")
    added, removed = _diff(seed_text, ledger.render())
    assert removed == [
        "| **2026-01-31** | **Nsys Profiling & Kernel Analysis** | **Mastered GEMM kernel "
        "naming, understood memory-bound vs compute-bound, analyzed Softmax overhead motivating "
        "FlashAttention** |"
    ]
    assert added == [
        "| 2026-01-31 | Nsys Profiling & Kernel Analysis | Mastered GEMM kernel naming, "
        "understood memory-bound vs compute-bound, analyzed Softmax overhead motivating "
        "FlashAttention |",
        "| **2026-02-01** | **FlashAttention \\| tiling** | **Wrote the kernel** |",
    ]
    rows = parse_ledger(ledger.render()).sessions()
    assert rows[-1].topic == "FlashAttention \\| tiling" and rows[-1].bold


def test_an_older_session_goes_in_date_order_and_the_newest_stays_bold(seed_text):
    ledger = parse_ledger(seed_text)
    edit.add_session(ledger, "2026-01-29", "Setup", "Cluster access")
    rows = ledger.sessions()
    assert [r.date for r in rows] == ["2026-01-29", "2026-01-30", "2026-01-30", "2026-01-31"]
    assert [r.bold for r in rows] == [False, False, False, True]
    assert _diff(seed_text, ledger.render())[1] == []  # nothing else changed


def test_moving_an_item_moves_exactly_its_line(seed_text):
    ledger = parse_ledger(seed_text)
    item = edit.move_item(ledger, "flashattention implementation", "developing")
    assert item.level == "developing"
    after = ledger.render()
    assert sorted(after.splitlines()) == sorted(seed_text.splitlines())
    assert [i.text for i in ledger.items("developing")][-1].startswith(
        "**FlashAttention implementation**"
    )


def test_an_ambiguous_or_unknown_match_is_one_sentence_and_changes_nothing(seed_text):
    ledger = parse_ledger(seed_text)
    with pytest.raises(edit.LedgerError, match=r"items match 'memory'.*give more of its words"):
        edit.move_item(ledger, "memory", "mastered")
    with pytest.raises(edit.LedgerError, match="no knowledge item matches"):
        edit.move_item(ledger, "quantum gravity", "mastered")
    with pytest.raises(edit.LedgerError, match="not a mastery level"):
        edit.move_item(ledger, "Gradient checkpointing", "purple")
    assert ledger.render() == seed_text


def test_ticking_keeps_the_line_and_adds_the_note(seed_text):
    ledger = parse_ledger(seed_text)
    edit.tick(ledger, "actions", "Investigate OOM causes", "*(完成)*")
    edit.tick(ledger, "goals", "distributed training")
    added, removed = _diff(seed_text, ledger.render())
    assert removed == [
        "- [ ] Investigate OOM causes for XL/2.7B models at context_length=1024 *(新增)*",
        "- [ ] Implement distributed training strategies",
    ]
    assert added == [
        "- [x] Investigate OOM causes for XL/2.7B models at context_length=1024 *(新增)* *(完成)*",
        "- [x] Implement distributed training strategies",
    ]


def test_archived_insight_goes_after_the_last_one_before_the_footer(seed_text, tmp_path):
    ledger = parse_ledger(seed_text)
    edit.archive_insight(
        ledger, "2026-02-01", "Tiles", "Tiles stay in SRAM.\nHBM traffic drops.", ["zero-2"]
    )
    text = ledger.render()
    tail = text[text.index("### 2026-01-31: Memory-bound") :]
    assert tail.splitlines()[4:] == [
        "",
        "### 2026-02-01: Tiles",
        '> "Tiles stay in SRAM.',
        '> HBM traffic drops." — [entry:zero-2]',
        "",
        "---",
        "",
        '*This ledger is updated at the end of each study session. Say "End Session" to '
        "generate updates.*",
    ]


def test_missing_parts_are_created_in_the_example_order():
    ledger = parse_ledger("# Notes\n\n## 💡 Key Insights Archive\n")
    edit.add_item(ledger, "blind", "**ZeRO-3**: not yet")
    edit.add_action(ledger, "short-term", "Read the ZeRO paper")
    edit.add_goal(ledger, "Train a 1B model")
    edit.set_updated(ledger, "2026-02-02")
    text = ledger.render()
    assert text.index("## 🧠") < text.index("## 📉") < text.index("## 🎯") < text.index("## 💡")
    assert "### Short-term (This Week)\n- [ ] Read the ZeRO paper\n" in text
    assert text.startswith("# Notes\n**Last Updated:** 2026-02-02\n")
    assert parse_ledger(text).items("blind_spots")[0].text == "**ZeRO-3**: not yet"


def test_a_new_ledger_has_every_section_and_checks_clean(tmp_path):
    text = edit.new_ledger("CS336", "2026-02-01")
    ledger = parse_ledger(text)
    assert ledger.title == "CS336 Learning Ledger"
    report = check_ledger(tmp_path, ledger)
    assert report.ok, report.problems


def test_check_finds_the_seed_insight_with_unsourced_numbers(seed_text, tmp_path):
    report = check_ledger(tmp_path, parse_ledger(seed_text))
    assert [(p.kind, p.line) for p in report.problems] == [("unsourced_number", 89)]
    assert "'400μs', '300μs'" in report.problems[0].detail


def test_check_reports_structure_and_dangling_references(tmp_path):
    text = (
        "# L\n**Last Updated:** 2026-01-01\n"
        "## 🧠 Knowledge Graph\n### 🟢 Mastered\n- **A**: x\n### 🔴 Blind Spots\n- **A**: x\n"
        "## 📉 Action Items\n- [] broken box\n"
        "## 📚 Session History\n| Date | Topic | Key Outcome |\n|---|---|---|\n"
        "| **2026-01-02** | **T** | **O** |\n| 2026-01-05 | T2 |\n"
        "## 🎯 Course Goals\n"
        "## 💡 Key Insights Archive\n### No date here\n> see [entry:nope] and [m:gone]\n"
    )
    report = check_ledger(tmp_path, parse_ledger(text))
    kinds = [(p.kind, p.line) for p in report.problems]
    assert ("structure", 7) in kinds  # A at two levels
    assert ("structure", 9) in kinds  # "- []"
    assert ("structure", 13) in kinds  # the bold row is not the newest
    assert ("structure", 14) in kinds  # two cells
    assert ("structure", 17) in kinds  # undated insight
    assert ("missing_entry", 18) in kinds and ("bad_citation", 18) in kinds
    assert not report.ok


def test_an_update_that_changes_nothing_writes_nothing(tmp_path):
    from journal_agent.learning.ledger_ops import LedgerOperation
    from journal_agent.learning.ledger_store import LedgerStore
    from tests.learning.learning_helpers import SEED_LEDGER

    path = tmp_path / "learning_ledger.md"
    path.write_bytes(SEED_LEDGER.read_bytes())
    stat = path.stat()
    result = LedgerStore(tmp_path).update(
        [LedgerOperation(op="tick_action", match="Verify the concurrency fix")]
    )
    assert result.changes and path.read_bytes() == SEED_LEDGER.read_bytes()
    assert path.stat().st_mtime_ns == stat.st_mtime_ns  # not even the date was rewritten
