"""``journal-agent ledger …`` as a user runs it, and two processes updating at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from journal_agent.learning.ledger import parse_ledger
from tests.learning.learning_helpers import SEED_LEDGER


def _seed(ws: Path) -> Path:
    path = ws / "learning_ledger.md"
    path.write_bytes(SEED_LEDGER.read_bytes())
    return path


def test_show_counts_due_and_last_sessions(ws, cli):
    _seed(ws)
    r = cli("ledger")
    assert r.returncode == 0, r.stderr
    assert "CS336 Learning Ledger  (last updated 2026-01-31)" in r.stdout
    assert "🟢 12 mastered   🟡 10 developing   🔴 7 blind spots" in r.stdout
    assert "2026-01-31  Nsys Profiling & Kernel Analysis" in r.stdout
    data = json.loads(cli("ledger", "--json").stdout)
    assert data["counts"] == {"mastered": 12, "developing": 10, "blind_spots": 7}
    assert data["due"] == []
    assert data["new_count"] == 12 + 10 + 7 + 3  # every item and insight, never reviewed
    assert len(data["new"]) == 20  # the first ones, not a journal's worth
    assert data["suggestions"] == []


def test_each_update_subcommand_changes_the_file(ws, cli):
    path = _seed(ws)
    steps = [
        ("session", "FlashAttention", "Tiled the softmax", "--date", "2026-02-01"),
        ("add-item", "blind", "**Triton autotuning**: never tried *(新增)*"),
        ("move", "Arithmetic Intensity", "mastered"),
        ("add-action", "immediate", "Benchmark FA2 against the naive kernel"),
        ("tick", "Review FlashAttention paper", "--note", "*(完成)*"),
        ("add-goal", "Write the report"),
        ("tick-goal", "memory-efficient attention"),
        ("insight", "Fusing wins", "Fusion removes the HBM round trip.", "--date", "2026-02-01"),
        ("updated", "--date", "2026-02-02"),
    ]
    for step in steps:
        r = cli("ledger", *step)
        assert r.returncode == 0, (step, r.stderr)
    ledger = parse_ledger(path.read_text(encoding="utf-8"))
    assert ledger.last_updated == "2026-02-02"
    assert ledger.sessions()[-1].topic == "FlashAttention" and ledger.sessions()[-1].bold
    assert ledger.items("blind_spots")[-1].text.startswith("**Triton autotuning**")
    assert ledger.items("mastered")[-1].text.startswith("**Arithmetic Intensity**")
    immediate = [c.text for c in ledger.checkboxes("actions") if c.horizon.startswith("Immediate")]
    assert immediate[-1] == "Benchmark FA2 against the naive kernel"
    assert [g.text for g in ledger.checkboxes("goals") if g.done][-1].startswith("Implement mem")
    assert ledger.insights()[-1].title == "Fusing wins"
    r = cli("ledger", "check", "--json")
    assert r.returncode == 1  # the seed's own unsourced insight is still there
    assert [p["kind"] for p in json.loads(r.stdout)["problems"]] == ["unsourced_number"]


def test_bad_input_is_one_sentence_and_the_file_is_untouched(ws, cli):
    path = _seed(ws)
    before = path.read_bytes()
    for args, words in [
        (("move", "memory", "mastered"), "items match 'memory'"),
        (("session", "T", "O", "--date", "2026-13-01"), "not a calendar date"),
        (("insight", "Peak", "The step peaks at 40 GB."), "with no source"),
        (("insight", "Peak", "The step is fast.", "-s", "m:nope"), "does not resolve"),
        (("insight", "Peak", "The step is fast.", "-s", "no-such-entry"), "names no entry"),
        (("add-item", "purple", "x"), "not a mastery level"),
    ]:
        r = cli("ledger", *args)
        assert r.returncode == 1, args
        assert words in r.stderr and "Traceback" not in r.stderr
        assert r.stderr.count("\n") == 1
    assert path.read_bytes() == before


def test_a_ledger_that_is_not_utf8_is_refused_in_one_sentence(ws, cli):
    (ws / "learning_ledger.md").write_bytes(b"# L\n**Last Updated:** 2026-01-01\n\xff\xfe\n")
    r = cli("ledger", "add-goal", "x")
    assert r.returncode == 1 and "not valid UTF-8 (line 3)" in r.stderr


def test_init_then_check_passes_and_apply_takes_a_batch(ws, cli, tmp_path):
    assert cli("ledger", "init", "--title", "CS336").returncode == 0
    assert cli("ledger", "init").returncode == 1
    r = cli("ledger", "check")
    assert r.returncode == 0, r.stdout
    ops = [
        {"op": "add_item", "level": "developing", "text": "**ZeRO-2**: shards grads"},
        {"op": "add_session", "topic": "ZeRO", "outcome": "Sharding understood"},
        {"op": "move_item", "match": "nothing like this", "level": "mastered"},
    ]
    batch = tmp_path / "ops.json"
    batch.write_text(json.dumps(ops))
    before = (ws / "learning_ledger.md").read_bytes()
    r = cli("ledger", "apply", str(batch))
    assert r.returncode == 1 and "no knowledge item matches" in r.stderr
    assert (ws / "learning_ledger.md").read_bytes() == before  # all or none
    r = cli("ledger", "apply", "-", stdin=json.dumps(ops[:2]))
    assert r.returncode == 0, r.stderr
    assert cli("ledger", "check").returncode == 0


WORKER = """
import sys
from pathlib import Path
from journal_agent.learning.ledger_store import LedgerStore
from journal_agent.learning.ledger_ops import LedgerOperation

root, name, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = LedgerStore(root)
for i in range(n):
    store.update([
        LedgerOperation(op="add_item", level="developing", text=f"{name} item {i}"),
        LedgerOperation(op="add_session", date="2026-02-01", topic=f"{name} {i}", outcome="x"),
    ])
"""


def test_two_processes_updating_at_once_lose_nothing(ws):
    path = _seed(ws)
    n = 15
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(ws), name, str(n)])
        for name in ("alpha", "beta")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    text = path.read_text(encoding="utf-8")
    ledger = parse_ledger(text)
    items = {i.text for i in ledger.items("developing")}
    for name in ("alpha", "beta"):
        assert {f"{name} item {i}" for i in range(n)} <= items
    topics = [r.topic for r in ledger.sessions()]
    assert sum(t.startswith(("alpha", "beta")) for t in topics) == 2 * n
    assert sum(r.bold for r in ledger.sessions()) == 1
    # Every line of the user's ledger is still there (the old newest row now plain).
    kept = text.splitlines()
    for line in SEED_LEDGER.read_text(encoding="utf-8").splitlines():
        if line.startswith("| **2026-01-31**"):
            line = line.replace("**", "")
        assert "Last Updated" in line or line in kept, line


def test_an_insight_quoting_a_number_its_record_does_not_hold_is_refused(ws, cli):
    from journal_agent.paths import measurements_dir
    from profiling.records import MeasurementRecord, Quantity, RecordStore

    RecordStore(measurements_dir(ws)).save(
        MeasurementRecord(
            id="est-0000beef",
            kind="estimated",
            title="7B on two GPUs",
            results=[Quantity(name="total per GPU", value=91.64e9, unit="B")],
        )
    )
    assert cli("ledger", "init").returncode == 0
    ok = cli("ledger", "insight", "Too big", "It needs 91.64 GB per GPU.", "-s", "m:est-0000beef")
    assert ok.returncode == 0, ok.stderr
    r = cli("ledger", "insight", "Too big", "It needs 85 GB per GPU.", "-s", "m:est-0000beef")
    assert r.returncode == 1
    assert "it quotes '85 GB', which is in none of its sources ([m:est-0000beef])" in r.stderr
    # Written by hand, the same mistake is what `ledger check` reports.
    path = ws / "learning_ledger.md"
    path.write_text(path.read_text().replace("91.64 GB", "85 GB"))
    r = cli("ledger", "check", "--json")
    problems = json.loads(r.stdout)["problems"]
    assert r.returncode == 1 and [p["kind"] for p in problems] == ["bad_citation"]


@pytest.mark.parametrize(
    "args",
    [["ledger"], ["ledger", "check"], ["review", "--list"], ["feedback", "--history"]],
)
def test_learning_commands_import_no_heavy_module(ws, home, args):
    """They call neither a model nor torch: start-up stays light (see test_startup.py)."""
    (ws / "learning_ledger.md").write_bytes(SEED_LEDGER.read_bytes())
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "journal_agent", *args],
        cwd=ws,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    loaded = {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert not loaded & {"anthropic", "torch", "mcp", "matplotlib"}, args


def test_root_may_come_before_the_subcommand(ws, cli, tmp_path):
    _seed(ws)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("ledger", "--root", str(ws), "add-goal", "Ship the report", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert "Ship the report" in (ws / "learning_ledger.md").read_text(encoding="utf-8")
    assert not (elsewhere / "learning_ledger.md").exists()


def test_write_and_edit_of_the_ledger_take_the_journals_lock(ws):
    """So an agent's Edit of the ledger and a ledger update never interleave."""
    from journal_agent.journal.store import JournalStore
    from journal_agent.tools.write import lock_file_for

    assert lock_file_for(ws, ws / "learning_ledger.md") == JournalStore(ws).lock_path
    assert lock_file_for(ws, ws / "notes" / "learning_ledger.md") != JournalStore(ws).lock_path


def test_an_update_holding_a_secret_is_refused(ws, cli):
    path = _seed(ws)
    before = path.read_bytes()
    key = "sk-ant-api03-" + "Q7xv9LmZ2pR4tY8wK1nB6cD3fH5jS0aE"
    r = cli("ledger", "add-action", "immediate", f"Use api_key={key} for the eval run")
    assert r.returncode == 1 and "Anthropic API key" in r.stderr and "line" in r.stderr
    assert key not in r.stderr and path.read_bytes() == before


def test_an_insight_citing_an_entry_quotes_numbers_the_entry_has(ws, cli):
    from tests.learning.learning_helpers import entry

    text = entry(
        "Checkpointing Cost",
        "2026-11-22",
        "What does recomputation cost?",
        "The step went from 412 ms to 538 ms with checkpointing on.",
    )
    (ws / "learning_journal.md").write_text("# Learning Journal\n\n" + text, encoding="utf-8")
    assert cli("ledger", "init").returncode == 0
    source = "checkpointing-cost-2026-11-22"
    ok = cli("ledger", "insight", "Recompute", "It costs 0.538 s a step.", "-s", source)
    assert ok.returncode == 0, ok.stderr  # 538 ms, in other units
    bad = cli("ledger", "insight", "Recompute", "It costs 600 ms a step.", "-s", source)
    assert bad.returncode == 1
    assert f"'600 ms', which is in none of its sources ([entry:{source}])" in bad.stderr
    assert cli("ledger", "check").returncode == 0
