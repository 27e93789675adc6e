"""The journal read an entry at a time gives exactly what parse_journal gives on the whole text:
the same entries (raw text, line, title, date, id, explicit id) and preamble, whatever the
chunk size cuts through, on hand-written corner cases and on generated journals."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal_agent.journal import stream
from journal_agent.journal.model import parse_journal
from journal_agent.journal.stream import JournalFile

REPO = Path(__file__).resolve().parents[2]


def _same(path: Path, errors: str = "strict") -> int:
    text = path.read_bytes().decode("utf-8", errors)
    want = parse_journal(text)
    with JournalFile(path, file=path.open("rb"), errors=errors, owned=True) as got:
        entries = list(got.entries())
        assert got.preamble() == want.preamble
    assert len(entries) == len(want.entries)
    for a, b in zip(entries, want.entries, strict=True):
        assert (a.raw, a.start_line, a.title, a.date, a.id, a.explicit_id) == (
            b.raw, b.start_line, b.title, b.date, b.id, b.explicit_id,
        )  # fmt: skip
    return len(entries)


CASES = {
    "plain": "# Journal\n\n## One (2026-01-02)\n<!-- entry: a -->\nbody\n\n## Two (2026-01-03)\n",
    "bom and crlf": "\ufeff## First (2026-01-02)\r\n\r\n<!-- entry: f -->\r\nbody\r\n",
    "fenced headings": "## A (2026-01-02)\n```\n## Not (2026-01-03)\n```\n~~~~\n# No (2026-02-02)\n"
    "~~~\n## Still not (2026-01-01)\n~~~~\n## B (2026-01-04)\n",
    "fence closed by unicode blank info": "## A (2026-01-02)\n```\n```\u00a0\n## B (2026-01-03)\n",
    "duplicate ids": "## T (2026-01-02)\n<!-- entry: x -->\n## T (2026-01-02)\n## T (2026-01-02)\n"
    "<!-- entry: x -->\n## Other (2026-01-02)\n<!-- entry: t-2026-01-02 -->\n",
    "id comment after blanks": "## A (2026-01-02)\n\n\n<!-- entry: late -->\n## B (2026-01-03)"
    "\n\n\n\n<!-- entry: too-late -->\n",
    "id at end without newline": "## A (2026-01-02)\n<!-- entry: last -->",
    "no entries": "# Just a header\n\nnothing dated\n",
    "empty": "",
    "emoji and cjk": "## 学习 🎯 (2026-01-02)\n### 🎯 Intuition\n漢字 ✓\n## Ünïcode (2026-01-03)\n",
    "headings indented and deep": "   ## Three spaces (2026-01-02)\n    ## Four (2026-01-03)\n"
    "### Level three (2026-01-04)\n# Level one 2026-01-05\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_hand_written_journals_read_alike(tmp_path, monkeypatch, name, chunk):
    monkeypatch.setattr(stream, "CHUNK", chunk)
    path = tmp_path / "learning_journal.md"
    path.write_bytes(CASES[name].encode())
    _same(path)


def test_invalid_utf8_is_refused_or_replaced_alike(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "CHUNK", 5)
    path = tmp_path / "learning_journal.md"
    path.write_bytes(b"## A (2026-01-02)\nbad \xff\xfe here\n\xe2\x82\n## B (2026-01-03)\n\xc3")
    assert _same(path, errors="replace") == 2
    with (
        pytest.raises(UnicodeDecodeError),
        JournalFile(path, file=path.open("rb"), owned=True) as bad,
    ):
        bad.outline  # noqa: B018 (the outline is where the file is read)


def test_a_generated_journal_reads_alike(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "bench_journal", REPO / "benchmarks/bench_journal.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench._build(tmp_path, 300, random.Random(1))
    monkeypatch.setattr(stream, "CHUNK", 4096)
    assert _same(tmp_path / "learning_journal.md") == 300


LINES = st.sampled_from([
    "## Entry (2026-01-02)", "## Entry (2026-01-02)\r", "# Top 2026-03-04", "### Deep (2026-01-02)",
    "<!-- entry: e1 -->", "<!-- entry: e1 -->\r", "  <!-- entry: x/../y -->", "", "text 🎯",
    "```", "```python", "~~~", "````", "    ## indented (2026-01-05)", "## (2026-01-02)",
    "## no date", "\ufeff## bom (2026-01-02)", "**Context**: x", "#tag #other",
])  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINES, max_size=30), chunk=st.sampled_from([1, 3, 16, 1 << 20]),
       end=st.sampled_from(["", "\n"]))  # fmt: skip
def test_any_journal_reads_alike(tmp_path_factory, lines, chunk, end):
    old = stream.CHUNK
    stream.CHUNK = chunk
    try:
        path = tmp_path_factory.mktemp("j") / "learning_journal.md"
        path.write_bytes(("\n".join(lines) + end).encode())
        _same(path)
    finally:
        stream.CHUNK = old
