"""The inbox page in a browser: captured moments shown as text, dismissed into the capture
inbox, accepted into a `/learn` background run (or refused in one sentence without a key)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CLI
from tests.view.conftest import MOMENTS, screenshot, start_server, stop_server

pytestmark = pytest.mark.slow


def _waiting(workspace) -> list[dict]:
    return CLI().json("inbox", "--root", str(workspace.root))


def _moment(page, text: str):
    return page.locator("section.moment", has_text=text[:30])


def test_inbox_shows_moments_and_dismisses_one(page, server, workspace):
    page.goto(server.url)
    page.click("nav a:has-text('Inbox')")
    page.wait_for_selector("section.moment")
    assert page.locator("section.moment").count() == 3
    hostile = _moment(page, "is only text here")
    assert "<script>" in hostile.inner_text()
    assert page.evaluate("window.pwned === undefined")
    assert (
        _moment(page, MOMENTS[0])
        .locator("a.ref")
        .get_attribute("href")
        .endswith("code/src/train.py.html#L6-7")
    )
    screenshot(page, "inbox")

    second = _moment(page, MOMENTS[1])
    second.locator("button.dismiss").click()
    page.wait_for_selector("section.moment.done")
    assert second.locator(".outcome").inner_text() == "Dismissed."
    assert [m["text"] for m in _waiting(workspace)] == [MOMENTS[0], MOMENTS[2]]


def test_accept_without_an_api_key_says_so_and_keeps_the_moment(page, server, workspace):
    page.goto(server.url)
    page.goto(f"{server.origin}/inbox.html")
    first = _moment(page, MOMENTS[0])
    first.locator("button.accept").click()
    outcome = first.locator(".outcome")
    outcome.wait_for(state="visible")
    assert "ANTHROPIC_API_KEY is not set" in outcome.inner_text()
    assert MOMENTS[0] in [m["text"] for m in _waiting(workspace)]
    assert not (workspace.root / ".journal" / "runs").exists()


def test_accept_starts_learn_in_the_background(page, workspace):
    # A key, and an API address where nothing listens: the run starts, then fails on its own.
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    served = start_server(workspace.root, env=env)
    try:
        page.goto(served.url)
        page.goto(f"{served.origin}/inbox.html")
        first = _moment(page, MOMENTS[0])
        first.locator("button.accept").click()
        outcome = first.locator(".outcome")
        outcome.wait_for(state="visible", timeout=60_000)
        text = outcome.inner_text()
        assert text.startswith("Started /learn as background run"), text
        run_id = text.split("background run ")[1].split()[0]
        status = json.loads(
            (workspace.root / ".journal" / "runs" / run_id / "status.json").read_text()
        )
        assert status["target"] == "learn"
        waiting = _waiting(workspace)
        moment = next(m for m in waiting if m["text"] == MOMENTS[0])
        assert moment["id"] in status["prompt"] and MOMENTS[0] in status["prompt"]
    finally:
        stop_server(served)
