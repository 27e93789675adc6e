"""Encodings: emoji and CJK work; invalid UTF-8 and mojibake are found, reported, repaired."""

from __future__ import annotations

import json

from journal_agent.journal import api
from journal_agent.journal.encoding import repair, scan
from journal_agent.journal.store import HEADER

from .conftest import make_entry


def double_encode(text: str) -> str:
    """UTF-8 bytes read as cp1252 (undefined bytes dropped, as the user's files were)."""
    return text.encode("utf-8").decode("cp1252", errors="ignore")


def test_emoji_and_cjk_round_trip_through_append_search_and_show(ws):
    entry = make_entry(title="显存 机制 🔍", body="梯度累积 🧮 节省显存。\n")
    outcome = api.append_entry(ws.workspace, entry)
    assert outcome.appended, outcome.problems
    assert api.check(ws.workspace).ok
    assert [h.title for h in api.search(ws.workspace, "梯度累积")] == ["显存 机制 🔍"]
    proc = ws.cli("show", outcome.entry_id)
    assert proc.returncode == 0 and "梯度累积 🧮 节省显存。" in proc.stdout


def test_mojibake_is_reported_by_line_and_repaired_with_a_backup(ws):
    good = HEADER + "\n" + make_entry(body="─── 机制 ✅ and 🔍 Key Insights\n")
    broken_line = "─── 机制 ✅ and 🔍 Key Insights"
    bad = good.replace(broken_line, double_encode(broken_line))
    assert "â”€" in bad and "æœºåˆ¶" in bad and "ðŸ”" in bad
    ws.journal.write_text(bad, encoding="utf-8")
    line = bad.splitlines().index(double_encode(broken_line)) + 1

    report = api.check(ws.workspace)
    encoding = [p for p in report.problems if p.kind == "encoding"]
    assert [p.line for p in encoding] == [line]
    assert encoding[0].entry == "zero-stage-2-2026-11-21"

    proc = ws.cli("repair", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["fixed_lines"] == [line] and result["unrepaired_lines"] == []
    assert ws.journal.read_text(encoding="utf-8") == good
    backups = list(ws.root.glob("learning_journal.md.bak-*"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == bad
    assert api.check(ws.workspace).ok


def test_lost_bytes_are_restored_only_when_unambiguous():
    # 🏷️ ends in 0x8F twice (emoji and variation selector); cp1252 drops both.
    lost = double_encode("### 🏷️ Tags")
    fixed = repair(lost.encode())
    assert fixed.data.decode() == "### 🏷️ Tags" and fixed.guessed_lines == [1]
    # A dropped byte in a character outside the journal's vocabulary cannot be told apart.
    for odd in (
        double_encode("\U0001f381 gift"),  # 🎁 ends in 0x81: 🎁 🎍 🎏 🎐 🎝 all fit
        double_encode("\U0001f41d bee"),  # 🐝 = F0 9F 90 9D: two bytes lost
    ):
        assert [i.kind for i in scan(odd.encode())] == ["mojibake"]
        result = repair(odd.encode())
        assert result.unrepaired_lines == [1]
        assert result.data == odd.encode()  # left as it was, for the user to fix


def test_plain_accents_are_not_mojibake():
    assert scan("café naïve Ångström — “quotes” 10 µs ±2 °C".encode()) == []


def test_invalid_utf8_fails_every_reader_with_one_sentence_and_repair_fixes_it(ws):
    good = HEADER + "\n" + make_entry()
    ws.journal.write_bytes(good.encode("utf-8") + b"caf\xe9 \x93quoted\x94\n")
    bad_line = good.count("\n") + 1
    # related checks the encoding a chunk at a time (its text whole took 500 MB at 100 MB).
    for args in (("list",), ("search", "zero"), ("show", "1"), ("related", "-")):
        proc = ws.cli(*args, stdin=make_entry(title="Draft"))
        assert proc.returncode == 1
        assert proc.stderr.startswith(
            f"error: learning_journal.md is not valid UTF-8 (line {bad_line})"
        )
        assert "journal-agent journal repair" in proc.stderr and "Traceback" not in proc.stderr
    proc = ws.cli("append", "-", stdin=make_entry(title="Other"))
    assert proc.returncode == 1 and "not valid UTF-8" in proc.stderr
    proc = ws.cli("check", "--json")
    assert proc.returncode == 1
    assert [p["kind"] for p in json.loads(proc.stdout)["problems"]] == ["encoding"]

    assert ws.cli("repair").returncode == 0
    assert ws.journal.read_text(encoding="utf-8").endswith("café “quoted”\n")
    assert ws.cli("list").returncode == 0


def test_a_lost_byte_is_told_apart_by_the_section_its_heading_names():
    # 📝 (F0 9F 93 9D) and 📐 (F0 9F 93 90) both arrive as "ðŸ“"; ┐ (E2 94 90) as "â”".
    original = "### 📝 Analogy\n### 📐 Diagrams\n┌───┐\n└───┘\n"
    result = repair(double_encode(original).encode())
    assert result.data.decode() == original
    assert result.unrepaired_lines == [] and result.guessed_lines == [1, 2, 3]
    # Without a section name the emoji stays ambiguous and the line is left for the user.
    assert repair(double_encode("📝 note\n").encode()).unrepaired_lines == [1]


def test_a_letter_before_closing_punctuation_is_not_mojibake(ws):
    # é (0xE9) followed by ” (0x94) looks like a 3-byte sequence that lost a byte.
    text = "He said “café” twice; the résumé’s point, café… done.\n"
    assert scan(text.encode()) == []
    entry = make_entry(body=text)
    assert api.append_entry(ws.workspace, entry).problems == []
    # ... while real damage next to the same punctuation is still found and repaired.
    broken = double_encode("┌───┐ and “quoted”\n")
    assert [i.kind for i in scan(broken.encode())] == ["mojibake"]
    assert repair(broken.encode()).data.decode() == "┌───┐ and “quoted”\n"


def test_subscripts_status_marks_and_cjk_with_a_lost_byte():
    # ₁ (E2 82 81), ⏸ (E2 8F B8) and ← (E2 86 90) each lose a byte; β₁ is in every Adam entry.
    original = "m = β₁ × m + (1 - β₁) × g  // ← note ⏸\n"
    assert repair(double_encode(original).encode()).data.decode() == original
    # 配 (E9 85 8D) loses 0x8D and arrives as "é…": amid other CJK damage it is still found.
    damaged = double_encode("分配与隔离\n")
    assert "é…" in damaged and [i.kind for i in scan(damaged.encode())] == ["mojibake"]
    assert repair(damaged.encode()).unrepaired_lines == [1]  # five CJK fits: left for the user
