"""Spaced review: FSRS scheduling as the fsrs package computes it, the queue, the state file's
safety, the interactive review on a terminal, and suggestions for the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from journal_agent.errors import UserError
from journal_agent.learning import review
from journal_agent.workspace import Workspace
from tests.learning.learning_helpers import SEED_LEDGER, write_journal


def test_scheduling_equals_the_fsrs_package_for_a_scripted_sequence(ws, cli):
    from fsrs import Card, Rating, Scheduler

    write_journal(ws)
    item = "entry:zero-stage-2-2026-11-20"
    script = [
        ("2026-11-20T09:00:00Z", "good"),
        ("2026-11-20T09:12:00Z", "good"),
        ("2026-11-23T08:00:00Z", "again"),
        ("2026-11-23T08:15:00Z", "hard"),
        ("2026-11-30T18:30:00Z", "good"),
        ("2027-01-15T07:00:00Z", "easy"),
    ]
    expected = Card()
    oracle = Scheduler(enable_fuzzing=False)
    for at, rating in script:
        r = cli("review", "--rate", item, rating, "--at", at, "--json")
        assert r.returncode == 0, r.stderr
        ours = json.loads(r.stdout)
        when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        expected, _ = oracle.review_card(expected, Rating[rating.capitalize()], when)
        assert ours["due"] == expected.due.isoformat(), (at, rating)
        assert ours["stability"] == pytest.approx(expected.stability, rel=1e-12)
        assert ours["state"] == expected.state.name.lower()
    state = json.loads((ws / ".journal" / "review.json").read_text())
    card = Card.from_dict(state["cards"][item]["card"])
    assert (card.due, card.difficulty, card.step) == (
        expected.due,
        expected.difficulty,
        expected.step,
    )
    assert [line["rating"] for line in state["log"]] == [3, 3, 1, 2, 3, 4]


def test_the_queue_holds_entries_items_and_insights_due_first(ws):
    write_journal(ws)
    (ws / "learning_ledger.md").write_bytes(SEED_LEDGER.read_bytes())
    cards = review.queue(Workspace(ws))
    kinds = {c.kind for c in cards}
    assert kinds == {"entry", "item", "insight"}
    zero = next(c for c in cards if c.id == "entry:zero-stage-2-2026-11-20")
    assert zero.question == "Why shard gradients as well as optimizer state?"
    assert "only the gradients" in zero.answer
    nvtx = next(c for c in cards if c.id == "item:nvtx-annotation")
    assert nvtx.question.startswith("What do you know about NVTX annotation?")
    now = datetime(2026, 11, 20, 9, tzinfo=UTC)
    review.rate(Workspace(ws), "item:nvtx-annotation", "good", now)
    later = review.queue(Workspace(ws), now + timedelta(days=30))
    assert later[0].id == "item:nvtx-annotation" and later[0].state == "learning"
    assert "item:nvtx-annotation" not in {c.id for c in review.queue(Workspace(ws), now)}
    # Never-reviewed items come after due ones, at most new_limit of them.
    assert [
        c.state for c in review.queue(Workspace(ws), now + timedelta(days=30), new_limit=2)
    ] == [
        "learning",
        "new",
        "new",
    ]


def test_a_corrupt_state_file_is_kept_aside_and_said_in_one_sentence(ws, cli):
    write_journal(ws)
    state = ws / ".journal" / "review.json"
    state.parent.mkdir()
    state.write_text('{"cards": {"entry:x": {"card": 12}}')
    r = cli("review", "--list")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "was unreadable" in r.stderr and "restore that file" in r.stderr
    aside = list(state.parent.glob("review.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"cards": {"entry:x": {"card": 12}}'
    r = cli("review", "--rate", "entry:zero-stage-2-2026-11-20", "good")
    assert r.returncode == 0, r.stderr  # a fresh schedule starts


def test_bad_ratings_and_ids_are_one_sentence(ws, cli):
    write_journal(ws)
    r = cli("review", "--rate", "entry:zero-stage-2-2026-11-20", "great")
    assert r.returncode == 1 and "use again, hard, good or easy" in r.stderr
    r = cli("review", "--rate", "entry:nope", "good")
    assert r.returncode == 1 and "review --list --all" in r.stderr
    r = cli("review")  # not a terminal
    assert r.returncode == 1 and "review --list" in r.stderr


def test_interactive_review_on_a_terminal(cli, ws):
    write_journal(ws)
    out, code = cli.terminal(
        "review",
        script=[
            (b"[Enter] show the answer", b"\n"),
            (b"[4] easy", b"3\n"),
            (b"[Enter] show the answer", b"q\n"),
        ],
    )
    assert code == 0, out
    question = out.index("Why shard gradients as well as optimizer state?")
    answer = out.index("Each GPU keeps only the gradients")
    assert question < out.index("[Enter] show the answer") < answer  # question first
    assert "→ good; next review" in out and "Reviewed 1." in out
    state = json.loads((ws / ".journal" / "review.json").read_text())
    assert [(x["item"], x["rating"]) for x in state["log"]] == [
        ("entry:zero-stage-2-2026-11-20", 3)
    ]


def test_review_history_suggests_mastery_moves_never_applies_them(ws, cli):
    (ws / "learning_ledger.md").write_bytes(SEED_LEDGER.read_bytes())
    before = (ws / "learning_ledger.md").read_bytes()
    t0 = datetime(2026, 2, 1, 9, tzinfo=UTC)
    for days, rating in [(0, "good"), (1, "again"), (2, "again")]:
        review.rate(Workspace(ws), "item:nvtx-annotation", rating, t0 + timedelta(days=days))
    for days, rating in [(0, "good"), (9, "good"), (20, "easy")]:
        review.rate(Workspace(ws), "item:arithmetic-intensity", rating, t0 + timedelta(days=days))
    found = {s["id"]: s for s in review.suggestions(Workspace(ws))}
    assert found["item:nvtx-annotation"]["to"] == "blind_spots"
    assert found["item:arithmetic-intensity"]["to"] == "mastered"
    assert (ws / "learning_ledger.md").read_bytes() == before  # suggestions only
    # Applying one is the ledger command it names.
    r = cli("ledger", "apply", "-", stdin=json.dumps([found["item:nvtx-annotation"]["operation"]]))
    assert r.returncode == 0, r.stderr
    assert "moved to 🔴" in r.stdout
    assert "item:nvtx-annotation" not in {s["id"] for s in review.suggestions(Workspace(ws))}


def test_a_naive_datetime_is_refused():
    with pytest.raises(UserError, match="time zone"):
        review.utc(datetime(2026, 1, 1))


def test_the_json_list_printed_in_pieces_is_the_whole_document(ws, cli):
    # `review --list --all --json` prints a card at a time (every card of a 100 MB journal as
    # one string took a gigabyte): the text is json.dumps of the whole list, as before.
    import json

    r = cli("review", "--list", "--all", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[]\n" and json.loads(r.stdout) == []
    write_journal(ws)
    r = cli("review", "--list", "--all", "--json")
    cards = json.loads(r.stdout)
    assert len(cards) >= 2 and {c["kind"] for c in cards} >= {"entry"}
    assert r.stdout == json.dumps(cards, indent=2, ensure_ascii=False) + "\n"


def test_every_card_comes_one_at_a_time_reviewed_by_due_date_then_new_in_journal_order(ws, cli):
    # `review --list --all` and `export json` take the cards as they come (every card of a
    # 100 MB journal held at once took 362 MB): the order is still the queue's.
    r = cli("review", "--list", "--all")
    assert r.returncode == 0 and r.stdout == "nothing is due\n", r.stderr
    write_journal(ws)
    (ws / "learning_ledger.md").write_bytes(SEED_LEDGER.read_bytes())
    w = Workspace(ws)
    items = [i.id for i in review.iter_items(w)]
    now = datetime(2026, 11, 20, 9, tzinfo=UTC)
    later, sooner = items[1], items[-1]  # journal order and rating order: not the due dates
    review.rate(w, later, "easy", now)
    review.rate(w, sooner, "again", now + timedelta(minutes=1))
    cards = review.every_card(w)
    assert not isinstance(cards, list)
    got = [(c.id, c.state) for c in cards]
    fresh = [(i, "new") for i in items if i not in (later, sooner)]
    assert got == [(sooner, "learning"), (later, "review"), *fresh]
    assert [c.id for c in review.queue(w, now + timedelta(days=3650))][:2] == [sooner, later]
    r = cli("review", "--list", "--all", "--json")
    assert [(c["id"], c["state"]) for c in json.loads(r.stdout)] == got
    r = cli("review", "--list", "--all")
    assert [line.split()[0] for line in r.stdout.splitlines()] == [i for i, _ in got]
