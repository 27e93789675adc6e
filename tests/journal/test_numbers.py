"""Quantities in prose and their matching against record values (units, rounding)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_agent.journal.model import parse_journal
from journal_agent.journal.numbers import find_quantities, matches
from journal_agent.journal.store import JournalStore

GIB = 2.0**30


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("needs 14 GB and 1,024 MiB", ["14 GB", "1,024 MiB"]),
        ("a 7B model, 2 GPUs, batch 8", []),
        ("took 0.5s then 3 s, 12ms, 2 min, in the 1990s", ["0.5s", "3 s", "12ms", "2 min"]),
        ("bandwidth 2.0 TB/s", []),
        ("1.5e9 bytes", []),  # scientific notation is not read as a quantity
    ],
)
def test_find_quantities(text, found):
    assert [q.text for q in find_quantities(text)] == found


@pytest.mark.parametrize(
    ("quoted", "value", "unit", "ok"),
    [
        ("71.7 GiB", 71.71 * GIB, "B", True),
        ("77.0 GB", 71.71 * GIB, "B", True),
        ("71.71 GB", 71.71 * GIB, "B", False),  # GB is not GiB
        ("72 GiB", 71.71 * GIB, "B", True),
        ("71.8 GiB", 71.71 * GIB, "B", False),
        ("1.53 s", 1534.0, "ms", True),
        ("1534 ms", 1.534, "s", True),
        ("1.5 GiB", 1.5, "s", False),  # another dimension
    ],
)
def test_matches_is_unit_aware_and_rounding_tolerant(quoted, value, unit, ok):
    (q,) = find_quantities(quoted)
    assert matches(q, value, unit) is ok


_PIECES = st.sampled_from(
    [
        "# Learning Journal\n",
        "## Old (2026-01-01)\n",
        "## A (2026-11-21)\n",
        "<!-- entry: a-2026-11-21-2 -->\n",
        "text \r\n",
        "```\n",
        "~~~~\n",
        "  \n",
        "机制 🔍",
        "\n",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=14).map("".join), st.sampled_from(["A", "B 机制"]))
def test_append_never_changes_existing_bytes(existing, title):
    with tempfile.TemporaryDirectory() as tmp:
        store = JournalStore(Path(tmp))
        if existing:
            store.path.write_bytes(existing.encode("utf-8"))
        result = store.append(f"## {title} (2026-11-21)\n\nbody\n")
        data = store.path.read_bytes().decode("utf-8")
        if existing:
            assert data.startswith(existing)
        journal = parse_journal(data)
        assert journal.render() == data
        assert journal.entries[-1].title == title and journal.entries[-1].id == result.entry_id
        assert len({e.id for e in journal.entries}) == len(journal.entries)
        assert data.splitlines()[result.line - 1] == f"## {title} (2026-11-21)"


@pytest.mark.parametrize(
    ("left", "result", "gives"),
    [
        ("The optimizer states are 3 × 13.48 GB ", "40.44 GB", 40.44),
        ("7B × 2 bytes ", "14 GB", 14.0),
        ("6.74B · 4 B / 2 ", "13.48 GB", 13.48),
        ("56 GB / 2 ", "28 GB", 28.0),
        ("momentum (28 GB) + variance (28 GB) ", "56 GB", 56.0),
        ("(14 + 56 + 14 + 15) ", "99 GB", 99.0),  # plain numbers are in the result's unit
        ("85.35 GiB ", "91.64 GB", 91.64),
        ("7B params × 2 bytes ", "14 GB", 14.0),  # label words between operands
        ("seq 2048 x batch 1 x hidden 4096 x 2 bytes ", "16.8 MB", 16.777216),
        ("Optimizer ", "56 GB", None),  # no calculation at all
        ("2 s + 3 GB ", "5 GB", None),  # mixes time into memory
    ],
)
def test_calculation_gives_what_the_shown_steps_compute(left, result, gives):
    from journal_agent.journal.numbers import calculation_gives

    value = calculation_gives(left, find_quantities(result)[0])
    assert value == pytest.approx(gives, rel=1e-3) if gives is not None else value is None
