"""The inbox page in a browser: captured moments shown as text, dismissed into the capture
inbox, accepted for `/learn` (queued: marked accepted, nothing written or started)."""

from __future__ import annotations

import pytest

from tests.conftest import CLI
from tests.view.conftest import MOMENTS, screenshot

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
    first = _moment(page, MOMENTS[0])
    # The files the turn edited, and the reference its text makes (a link too, #33).
    assert first.locator("p.files a.ref").get_attribute("href").endswith("train.py.html#L6-7")
    assert first.locator(".text a.ref").get_attribute("href").endswith("train.py.html#L6")
    screenshot(page, "inbox")

    second = _moment(page, MOMENTS[1])
    second.locator("button.dismiss").click()
    page.wait_for_selector("section.moment.done")
    assert second.locator(".outcome").inner_text() == "Dismissed."
    assert [m["text"] for m in _waiting(workspace)] == [MOMENTS[0], MOMENTS[2]]


def test_accept_queues_the_moment_for_learn_and_writes_nothing(page, server, workspace):
    journal = (workspace.root / "learning_journal.md").read_bytes()
    page.goto(server.url)
    page.goto(f"{server.origin}/inbox.html")
    third = _moment(page, "is only text here")
    third.locator("button.accept").click()
    page.wait_for_selector("section.moment.done")
    assert third.locator(".outcome").inner_text().startswith("Queued for /learn")

    # Queued, not written: the journal is as it was and no run was started; the moment
    # still waits, now first, marked accepted (what /learn with no topic offers first).
    assert (workspace.root / "learning_journal.md").read_bytes() == journal
    assert not (workspace.root / ".journal" / "runs").exists()
    waiting = _waiting(workspace)
    assert "is only text here" in waiting[0]["text"] and waiting[0]["accepted"]
    assert not any(m["accepted"] for m in waiting[1:])

    page.reload()
    third = _moment(page, "is only text here")
    third.locator(".accepted").wait_for(state="visible")
    assert third.locator("button.accept").count() == 0
    assert third.locator("button.dismiss").count() == 1
