"""Review that re-checks its code (issue #33): an entry's card shows the lines its references cite
as they are now, and asks, when they changed, whether the explanation still holds; number cards
ask to re-derive a record's value from its configuration and check the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal_agent.capture import read_inbox
from journal_agent.errors import UserError
from journal_agent.journal import api
from journal_agent.learning import number_cards, review, review_code
from journal_agent.view.files import text_reader
from journal_agent.workspace import Workspace
from tests.entries import render_entry

TRAIN = (
    "import torch\n"
    "\n"
    "\n"
    "def build_optimizer(model):\n"
    "    decay = [p for p in model.parameters() if p.ndim >= 2]\n"
    "    return torch.optim.AdamW(decay, lr=3e-4, betas=(0.9, 0.95))\n"
)
ENTRY = render_entry(
    "AdamW Betas",
    "2026-11-20",
    context="Reading `src/train.py:5-6`, where the optimizer is built.",
    question="Why beta2 = 0.95 rather than 0.999?",
    intuition="A shorter memory of squared gradients reacts faster to loss spikes.",
    tags="#optimizer",
)
EDITED = TRAIN.replace("betas=(0.9, 0.95)", "betas=(0.9, 0.999)")


def read(root: Path):
    def reader(rel: str) -> str | None:
        path = root / rel
        return path.read_text() if path.is_file() else None

    return reader


@pytest.fixture
def cited(ws: Path) -> Workspace:
    (ws / "src").mkdir()
    (ws / "src/train.py").write_text(TRAIN)
    workspace = Workspace(ws)
    assert api.append_entry(workspace, ENTRY).appended
    return workspace


def the_code(workspace: Workspace) -> list[review_code.CitedLines]:
    entry = workspace.journal.load().get("adamw-betas-2026-11-20")
    anchors = workspace.refs.anchors().get(entry.id, {})
    return review_code.cited_code(workspace.root, entry, anchors, read(workspace.root))


def test_a_card_shows_the_cited_lines_as_they_are_now(cited):
    [shown] = the_code(cited)
    assert (shown.state, shown.where) == ("fresh", "src/train.py:5-6")
    assert shown.lines[1].endswith("betas=(0.9, 0.95))")
    assert not review_code.code_changed([shown])
    # Two lines above: the card follows the code to where it is.
    (cited.root / "src/train.py").write_text("# optimizer\n# setup\n" + TRAIN)
    [shown] = the_code(cited)
    assert (shown.state, shown.where) == ("moved", "src/train.py:7-8")
    assert shown.lines[1].endswith("betas=(0.9, 0.95))")


def test_changed_code_is_shown_with_what_changed_and_asks_whether_it_still_holds(cited):
    (cited.root / "src/train.py").write_text(EDITED)
    [shown] = the_code(cited)
    assert shown.state == "changed" and review_code.code_changed([shown])
    assert shown.lines[1].endswith("betas=(0.9, 0.999))")  # the lines now, not as recorded
    assert "-    return torch.optim.AdamW(decay, lr=3e-4, betas=(0.9, 0.95))" in shown.diff
    # "It still holds": the code as it is now becomes the baseline, and check is green.
    assert review_code.still_holds(cited.root, "adamw-betas-2026-11-20", [shown]) == [
        "src/train.py:5-6"
    ]
    assert api.check(cited).ok


def test_revise_later_leaves_a_moment_naming_the_entry_and_the_change(cited):
    (cited.root / "src/train.py").write_text(EDITED)
    entry = cited.journal.load().get("adamw-betas-2026-11-20")
    shown = the_code(cited)
    moment_id = review_code.revise_later(cited.root, entry, shown, "seen in review")
    [moment] = read_inbox(cited.root)
    assert (moment.id, moment.kind, moment.entry) == (moment_id, "revise", entry.id)
    assert "**AdamW Betas**" in moment.text and "src/train.py:5-6" in moment.text
    assert "betas=(0.9, 0.999)" in moment.text
    assert [f.spec() for f in moment.files] == ["src/train.py:5-6"]
    review_code.revise_later(cited.root, entry, shown, "seen in review")  # the same change
    assert len(read_inbox(cited.root)) == 1
    assert not api.check(cited).ok  # nothing recorded: the entry is the learner's to revise


def test_it_still_holds_is_refused_when_the_lines_no_longer_hold_what_was_cited(cited):
    (cited.root / "src/train.py").write_text("import os\nimport math\n" + EDITED)
    shown = the_code(cited)
    assert shown[0].where == "src/train.py:7-8"  # shown where the code is, not at 5-6
    refs = (cited.root / ".journal/refs.jsonl").read_bytes()
    with pytest.raises(UserError, match=r"probably at src/train\.py:7-8"):
        review_code.still_holds(cited.root, "adamw-betas-2026-11-20", shown)
    assert (cited.root / ".journal/refs.jsonl").read_bytes() == refs


def test_a_secret_file_is_listed_never_shown(cited):
    (cited.root / "conf").mkdir()
    (cited.root / "conf/.env").write_text("API_KEY=sk-live-0123456789abcdef\n")
    entry = render_entry(
        "Settings",
        "2026-11-21",
        context="The key lives in `conf/.env:1`.",
        question="Where is the key?",
        intuition="In the environment file.",
        tags="#setup",
    )
    assert api.append_entry(cited, entry, force=True).appended
    [shown] = review_code.cited_code(
        cited.root,
        cited.journal.load().get("settings-2026-11-21"),
        cited.refs.anchors().get("settings-2026-11-21", {}),
        text_reader(cited.root),  # what the terminal, the view and the exports read with
    )
    assert shown.state == "hidden" and shown.lines == () and shown.diff == ()


def test_the_terminal_card_shows_the_code_and_revises_or_records(cli, ws, cited):
    (ws / "src/train.py").write_text(EDITED)
    out, code = cli.terminal(
        "review",
        script=[
            (b"[Enter] show the answer", b"\n"),
            (b"[Enter] decide later  [q] quit: ", b"r\n"),
            (b"[4] easy", b"3\n"),
        ],
    )
    assert code == 0, out
    at = out.index("The code it explains, as it is now:")
    assert out.index("A shorter memory of squared gradients") < at
    assert "+    return torch.optim.AdamW(decay, lr=3e-4, betas=(0.9, 0.999))" in out[at:]
    assert "Does the explanation still hold?" in out
    [moment] = read_inbox(ws)
    assert moment.kind == "revise" and f"Moment {moment.id} waits in the inbox" in out
    assert "→ good; next review" in out
    # Next time: it still holds.
    out, code = cli.terminal(
        "review",
        "--at",
        "2027-01-01T00:00:00Z",
        script=[
            (b"[Enter] show the answer", b"\n"),
            (b"[Enter] decide later  [q] quit: ", b"y\n"),
            (b"[4] easy", b"q\n"),
        ],
    )
    assert "Recorded the code as it is now: src/train.py:5-6." in out, out
    assert api.check(Workspace(ws)).ok


# -- number cards ---------------------------------------------------------------------------


@pytest.fixture
def quoted(ws: Path) -> Workspace:
    from profiling import estimate_memory
    from profiling.estimate.record import estimate_record

    workspace = Workspace(ws)
    est = estimate_memory(
        model="llama-7b", precision="mixed", optimizer="adamw", gpus=2, zero=2, gpu_mem=40
    )
    record = workspace.records.save(estimate_record(est))
    entry = render_entry(
        "ZeRO Stage 2",
        "2026-11-21",
        context="Two 40 GB GPUs.",
        question="Why does Llama-2-7B not fit?",
        intuition=f"Each GPU still holds all the weights: 64.80 GB per GPU [m:{record}].",
        tags="#zero",
    )
    assert api.append_entry(workspace, entry).appended
    return workspace


def test_a_quoted_record_value_becomes_a_number_card(quoted):
    [card] = number_cards.number_cards(quoted)
    assert card.id == f"number:{card.record}:per_gpu_total"
    assert (card.stated, card.kind) == ("64.80 GB", "estimated")
    assert card.entry == "zero-stage-2-2026-11-21"
    question = card.question()
    assert "▢▢▢ per GPU" in question and "64.80" not in question  # the number is the blank
    assert "- model: llama-7b" in question and "- zero: 2" in question
    assert "- gpu_mem: 40" in question and "None" not in question and "False" not in question
    answer = card.answer()
    assert answer.startswith("64.80 GB") and "The calculation:" in answer
    assert "Weights (fp16/bf16): Ψ · 2 B = 6.74B · 2 B = 13.48 GB" in answer
    # In the review queue with the other cards.
    ids = [c.id for c in review.queue(quoted)]
    assert card.id in ids and "entry:zero-stage-2-2026-11-21" in ids


@pytest.mark.parametrize(
    ("said", "result"),
    [
        ("64.80 GB", "right"),
        ("64.8 GB", "right"),  # the same value, fewer digits written
        ("64.8", "right"),  # the stated unit
        ("60.35 GiB", "right"),  # another unit of the same kind
        ("64800 MB", "right"),
        ("65 GB", "close"),  # within 1 %, not within the stated precision
        ("64.2 GB", "close"),
        ("70 GB", "wrong"),
        ("0.1 TB", "wrong"),  # a coarse answer does not widen the precision
    ],
)
def test_an_answer_is_checked_within_the_stated_precision(quoted, said, result):
    [card] = number_cards.number_cards(quoted)
    assert number_cards.check_answer(card, said).result == result


def test_an_answer_that_is_not_a_number_of_the_kind_is_refused_in_one_sentence(quoted):
    [card] = number_cards.number_cards(quoted)
    with pytest.raises(UserError, match="is not a number"):
        number_cards.check_answer(card, "a lot")
    with pytest.raises(UserError, match=r"not in a unit of 64\.80 GB's kind"):
        number_cards.check_answer(card, "65 ms")


def test_the_terminal_number_card_checks_the_answer_then_shows_the_calculation(cli, ws, quoted):
    [card] = number_cards.number_cards(quoted)
    out, code = cli.terminal(
        "review",
        script=[
            (b"[Enter] show the answer", b"s\n"),  # the entry's card: skipped
            (b"Your answer (like 64.80 GB)", b"lots\n"),
            (b"Your answer (like 64.80 GB)", b"65 GB\n"),
            (b"[4] easy", b"2\n"),
        ],
    )
    assert code == 0, out
    assert "'lots' is not a number" in out
    verdict = out.index("Close: 65 GB is within 1 % of the record's 64.80 GB")
    assert "(suggested: hard)" in out
    assert verdict < out.index("The calculation:") < out.index("→ hard; next review")
    state = json.loads((ws / ".journal/review.json").read_text())
    assert [(x["item"], x["rating"]) for x in state["log"]] == [(card.id, 2)]
