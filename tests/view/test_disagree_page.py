"""The view lists the entries that disagree (issue #33): the journal page names each pair, the
entry page the entries it disagrees with — live (asked for once the page shows) and exported."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from journal_agent.journal import api
from journal_agent.workspace import Workspace
from tests.conftest import CLI
from tests.entries import render_entry
from tests.view.conftest import Server, start_server, stop_server

OPTIM = (
    "import torch\n"
    "\n"
    "\n"
    "def build(model):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n"
)


def entry(title: str, date: str, text: str) -> str:
    return render_entry(
        title, date, context="Reading the optimizer.", question=f"{title}?", intuition=text,
        tags="#optimizer",
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Workspace, Server]]:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src/optim.py").write_text(OPTIM)
    ws = Workspace(root)
    for title, date, text in (
        ("Adam Betas", "2026-11-20", "`src/optim.py:5` uses betas (0.9, 0.95): fast variance."),
        ("Slow Moments", "2026-11-21", "In `src/optim.py:5` the betas are (0.9, 0.999)."),
        ("Weight Decay", "2026-11-22", "Decoupled decay is applied outside the moments."),
    ):
        assert api.append_entry(ws, entry(title, date, text)).appended
    server = start_server(root, env={"ANTHROPIC_API_KEY": None, "ANTHROPIC_AUTH_TOKEN": None})
    yield ws, server
    stop_server(server)


def test_the_journal_and_entry_pages_list_the_pair(page, project):
    _, server = project
    page.goto(server.url)
    page.wait_for_selector("#disagree[data-done]")
    section = page.locator("#disagree")
    assert section.is_visible()
    text = section.inner_text()
    assert "contradiction" in text.lower() and "Slow Moments ↔ Adam Betas" in text
    assert "`betas are (0.9, 0.999)` for src/optim.py:5 disagrees" in text
    section.locator("a:has-text('Adam Betas')").click()
    page.wait_for_selector("aside #disagree[data-done]")
    aside = page.locator("aside #disagree").inner_text()
    assert "Disagrees with" in aside and "Slow Moments" in aside
    page.goto(f"{server.origin}/entries/weight-decay-2026-11-22.html")
    page.wait_for_selector("aside #disagree[data-done]", state="attached")
    assert page.locator("aside #disagree").is_hidden()  # it disagrees with nobody


def test_the_export_lists_them_without_a_server(project, tmp_path):
    ws, _ = project
    site = tmp_path / "site"
    CLI()("export", "html", str(site), "--root", str(ws.root), check=True)
    index = (site / "index.html").read_text()
    assert "Entries that disagree" in index and "Slow Moments" in index
    one = (site / "entries/adam-betas-2026-11-20.html").read_text()
    assert "Disagrees with" in one and "slow-moments-2026-11-21.html" in one
    other = (site / "entries/weight-decay-2026-11-22.html").read_text()
    assert "Disagrees with" not in other
