"""The review page re-checks its code (issue #33): an entry's card shows the lines it explains
as they are now and, when they changed, asks whether the explanation still holds (recording the
code, or leaving the entry to revise in the inbox); a number card checks the learner's answer on
the server. Driven in headless Chromium as the user clicks, with the Anki export beside it."""

from __future__ import annotations

import sqlite3
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal_agent.capture import read_inbox
from journal_agent.journal import api
from journal_agent.workspace import Workspace
from tests.conftest import CLI
from tests.entries import render_entry
from tests.view.conftest import Server, start_server, stop_server
from tests.view.test_server import csrf_of, request

TRAIN = (
    "import torch\n"
    "\n"
    "\n"
    "def build_optimizer(model):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n"
    "\n"
    "\n"
    "def step(optimizer, loss):\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
)


def entry(title: str, context: str, intuition: str) -> str:
    return render_entry(
        title,
        "2026-11-20",
        context=context,
        question=f"What about {title.lower()}?",
        intuition=intuition,
        tags="#optimizer",
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Workspace, Server]]:
    from profiling import estimate_memory
    from profiling.estimate.record import estimate_record

    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src/train.py").write_text(TRAIN)
    ws = Workspace(root)
    est = estimate_memory(model="llama-7b", precision="mixed", gpus=2, zero=2, gpu_mem=40)
    record = ws.records.save(estimate_record(est))
    for text in (
        entry("AdamW Betas", "Reading `src/train.py:5`.", "A short memory reacts fast."),
        entry("The Step", "Reading `src/train.py:9-10`.", "Backward, then step."),
        entry("Memory", "Two GPUs.", f"Each GPU holds 64.80 GB [m:{record}]."),
    ):
        assert api.append_entry(ws, text).appended
    # The code moves on: both cited stretches change.
    (root / "src/train.py").write_text(
        TRAIN.replace("0.95", "0.999").replace("optimizer.step()", "optimizer.step()  # clip")
    )
    server = start_server(root, env={"ANTHROPIC_API_KEY": None, "ANTHROPIC_AUTH_TOKEN": None})
    yield ws, server
    stop_server(server)


def test_a_changed_card_shows_the_code_now_and_both_answers_work(page, project):
    ws, server = project
    page.goto(server.url)
    page.click("nav a:has-text('Review')")
    betas = page.locator("section.card[data-id='entry:adamw-betas-2026-11-20']")
    betas.locator("button.show").click()
    cited = betas.locator(".cited")
    assert "The code it explains, as it is now:" in cited.inner_text()
    assert "betas=(0.9, 0.999)" in cited.locator("pre.diff .add").inner_text()
    assert "Does the explanation still hold?" in cited.inner_text()
    betas.locator("button.revise").click()
    page.wait_for_selector("section.card.acted[data-id='entry:adamw-betas-2026-11-20']")
    assert "A moment waits in the inbox" in betas.locator(".code-outcome").inner_text()
    [moment] = read_inbox(ws.root)
    assert (moment.kind, moment.entry) == ("revise", "adamw-betas-2026-11-20")
    # The other card: it still holds, so its code becomes the baseline.
    step = page.locator("section.card[data-id='entry:the-step-2026-11-20']")
    step.locator("button.show").click()
    step.locator("button.holds").click()
    page.wait_for_selector("section.card.acted[data-id='entry:the-step-2026-11-20']")
    assert "Recorded the code as it is now: src/train.py:9-10." in step.inner_text()
    problems = {p.entry for p in api.check(ws).problems}
    assert problems == {"adamw-betas-2026-11-20"}  # revised later; the step is recorded
    # Rating still works on a card that was acted on.
    step.locator("button.rating-good").click()
    page.wait_for_selector("section.card.done[data-id='entry:the-step-2026-11-20']")


def test_a_number_card_checks_the_answer_on_the_server(page, project):
    _, server = project
    page.goto(server.url)
    page.click("nav a:has-text('Review')")
    card = page.locator("section.card[data-id^='number:']")
    assert "▢▢▢" in card.locator(".question").inner_text()
    assert card.locator(".answer").is_hidden()
    card.locator("input.number-answer").fill("70 GB")
    card.locator("form.check button").click()
    page.wait_for_selector("section.card[data-id^='number:'] .verdict-wrong")
    assert "Not quite: the record says 64.80 GB." in card.locator(".verdict").inner_text()
    card.locator("input.number-answer").fill("64.8 GB")
    card.locator("form.check button").click()
    page.wait_for_selector("section.card[data-id^='number:'] .verdict-right")
    assert card.locator(".answer").is_visible()  # the calculation, after the answer
    assert "The calculation:" in card.locator(".answer").inner_text()


def test_the_new_writes_need_the_csrf_token_and_say_what_is_wrong(project):
    ws, server = project
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": server.origin}
    body = "id=entry:adamw-betas-2026-11-20&action=holds"
    refs = (ws.root / ".journal/refs.jsonl").read_bytes()
    response, _ = request(server, "/api/review/code", method="POST", headers=form, body=body)
    assert response.status == 403 and (ws.root / ".journal/refs.jsonl").read_bytes() == refs
    ours = {**form, "X-CSRF-Token": csrf_of(server)}
    response, data = request(
        server, "/api/review/check", method="POST", headers=ours, body="id=number:x&answer=1"
    )
    assert response.status == 400 and "no number card" in data
    body = "id=entry:memory-2026-11-20&action=holds"  # its code did not change
    response, data = request(server, "/api/review/code", method="POST", headers=ours, body=body)
    assert response.status == 400 and "has not changed" in data


def test_the_anki_deck_shows_the_code_as_it_is_now_and_the_number_cards(project, tmp_path):
    ws, _ = project
    deck = tmp_path / "deck.apkg"
    CLI()("export", "anki", str(deck), "--root", str(ws.root), check=True)
    with zipfile.ZipFile(deck) as package:
        (tmp_path / "c.anki2").write_bytes(package.read("collection.anki2"))
    conn = sqlite3.connect(tmp_path / "c.anki2")
    notes = [row[0].split("\x1f") for row in conn.execute("SELECT flds FROM notes")]
    conn.close()
    betas = next(n for n in notes if "adamw betas" in n[0].lower())
    assert "betas=(0.9, 0.999)" in betas[2]  # the lines now
    assert "Does the explanation still hold?" in betas[2]
    number = next(n for n in notes if "▢▢▢" in n[0])
    assert "64.80 GB" in number[1] and "The calculation:" in number[1]
