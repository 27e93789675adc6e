"""LedgerUpdate and every tool input are bounded, and an update holds the journal's lock only
while it writes (finding 11 of the third review: 3,000 operations took 69 s while a concurrent
`journal append` waited 61 s; 20,000 over MCP never answered). Speed itself is measured by
``benchmarks/bench_ledger.py`` against a baseline in the same run, never asserted here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from journal_agent.learning.ledger_ops import MAX_OPERATIONS, LedgerOperation
from journal_agent.learning.ledger_store import LedgerStore
from journal_agent.tools import builtin_tools, make_context
from journal_agent.tools.base import MAX_INPUT_CHARS
from journal_agent.tools.registry import product_tools


def _item(i: int) -> dict:
    return {"op": "add_item", "level": "developing", "text": f"concept {i}"}


def test_finding_11_ledger_update_refuses_a_batch_over_the_bound_in_one_sentence(tmp_path):
    tool = product_tools()["LedgerUpdate"]
    ctx = make_context(tmp_path)
    done = tool.call(ctx, {"operations": [_item(i) for i in range(3_000)]})
    assert done.is_error and "\n" not in done.content
    assert f"at most {MAX_OPERATIONS} items" in done.content
    assert not (tmp_path / "learning_ledger.md").exists()
    long = tool.call(ctx, {"operations": [{**_item(0), "text": "x" * 50_000}]})
    assert long.is_error and "at most 4000 characters" in long.content
    # A batch within the bound is applied whole.
    ok = tool.call(ctx, {"operations": [_item(i) for i in range(MAX_OPERATIONS)]})
    assert not ok.is_error, ok.content
    assert (tmp_path / "learning_ledger.md").read_text().count("- concept ") == MAX_OPERATIONS


@pytest.mark.parametrize("name", ["Write", "Bash", "Grep", "LedgerUpdate", "JournalAppend"])
def test_finding_11_every_tool_refuses_an_input_over_the_size_limit(tmp_path, name):
    tools = {**builtin_tools(), **product_tools()}
    huge = "x" * (MAX_INPUT_CHARS + 1)
    done = tools[name].call(make_context(tmp_path), {"anything": huge})
    assert done.is_error and "over the limit" in done.content and "\n" not in done.content
    many = tools[name].call(make_context(tmp_path), {"items": list(range(MAX_INPUT_CHARS + 1))})
    assert many.is_error and "over the limit" in many.content


def test_finding_11_many_validation_errors_give_a_short_answer(tmp_path):
    done = product_tools()["LedgerUpdate"].call(
        make_context(tmp_path), {"operations": [{"op": "nope"}] * MAX_OPERATIONS}
    )
    assert done.is_error and f"(and {MAX_OPERATIONS - 3} more)" in done.content
    assert len(done.content) < 1_000


_TAKE_LOCK = """
import sys
from filelock import FileLock, Timeout
try:
    FileLock(sys.argv[1]).acquire(timeout=0)
except Timeout:
    sys.exit(3)
"""


def test_finding_11_the_journal_lock_is_free_while_an_update_computes(tmp_path):
    store = LedgerStore(tmp_path)
    store.update([LedgerOperation(**_item(0))], title="T")
    lock = tmp_path / ".journal/journal.lock"
    free_meanwhile: list[int] = []
    first = [True]

    def change(ledger):
        # Another process takes the journal's lock while the operations are applied ...
        taken = subprocess.run([sys.executable, "-c", _TAKE_LOCK, str(lock)], check=False)
        free_meanwhile.append(taken.returncode)
        if first[0]:
            # ... and another writer updates the ledger meanwhile: nothing of it is lost.
            first[0] = False
            other = [sys.executable, "-c", "from pathlib import Path; "
                     "from journal_agent.learning.ledger_store import LedgerStore; "
                     "from journal_agent.learning.ledger_ops import LedgerOperation as O; "
                     f"LedgerStore(Path({str(tmp_path)!r})).update([O(**{_item(1)!r})])",
                     ]  # fmt: skip
            subprocess.run(other, check=True)
        from journal_agent.learning.ledger_ops import apply

        return [apply(ledger, LedgerOperation(**_item(2)))]

    store.edit(change)
    assert free_meanwhile and all(code == 0 for code in free_meanwhile), free_meanwhile
    assert len(free_meanwhile) == 2  # redone once, on the other writer's content
    text = (tmp_path / "learning_ledger.md").read_text()
    assert all(f"- concept {i}" in text for i in range(3))


def test_finding_11_the_cli_refuses_an_overlong_field_in_one_sentence(cli, tmp_path):
    done = cli("ledger", "add-item", "developing", "x" * 5_000, "--root", str(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "at most 4000 characters" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_finding_11_the_batch_index_is_the_one_a_fresh_parse_finds(tmp_path):
    """A batch keeps the ledger's index current without re-reading every line after each
    operation; what it keeps must be exactly what parsing the result again finds."""
    from journal_agent.learning.ledger import parse_ledger
    from journal_agent.learning.ledger_edit import new_ledger
    from journal_agent.learning.ledger_ops import apply

    ledger = parse_ledger(new_ledger("T", "2026-01-01").replace("\n", "\r\n"))
    ops = [
        *(_item(i) for i in range(30)),
        {"op": "add_action", "horizon": "Immediate", "text": "read the paper"},
        {"op": "add_goal", "text": "finish assignment 2"},
        {"op": "add_session", "topic": "ZeRO", "outcome": "stage 2 sharded", "date": "2026-01-02"},
        {"op": "move_item", "match": "concept 3", "level": "mastered"},
        {"op": "tick_action", "match": "read the paper"},
        {"op": "add_item", "level": "blind", "text": "FP8 scaling"},
        {"op": "tick_goal", "match": "assignment 2", "note": "*(done)*"},
    ]
    for op in ops:
        apply(ledger, LedgerOperation(**op))
    fresh = parse_ledger(ledger.render())
    assert ledger.sections == fresh.sections and ledger.subsections == fresh.subsections
    assert (ledger.title_index, ledger.updated_index) == (fresh.title_index, fresh.updated_index)
    assert ledger.fences() == fresh.fences() and ledger.items() == fresh.items()
    assert ledger.newline == "\r\n" and "\r\n" in ledger.render()
