"""The drafts `inbox draft` wrote, on the inbox page in a browser: shown as safe HTML with the
moments they came from, accepted into the journal through the checks `inbox accept-draft`
runs (a draft that fails one is kept, its problems shown, nothing appended), or rejected."""

from __future__ import annotations

import pytest

from journal_agent.capture import drafts, read_inbox
from tests.entries import render_entry
from tests.view.conftest import MOMENTS, screenshot
from tests.view.test_server import csrf_of, request

pytestmark = pytest.mark.slow

HOSTILE = "<script>window.pwned = 'draft'</script> stays text"


def _draft(workspace, title: str, moment: int, context: str) -> str:
    """A draft saved as a drafting run saves it (checked), from the workspace's moment."""
    waiting = {m.text: m.id for m in read_inbox(workspace.root)}
    text = render_entry(
        title,
        "2026-11-26",
        context=context,
        question=f"Why {title.lower()}?",
        intuition="The scheduler counts optimizer steps, not batches.",
        tags="#training",
    )
    return drafts.save(workspace.root, text, moments=[waiting[MOMENTS[moment]]], model="haiku").id


@pytest.fixture(scope="module")
def saved(workspace) -> dict[str, str]:
    return {
        "good": _draft(workspace, "Warm-up Steps", 0, f"Reading `src/train.py:7`. {HOSTILE}."),
        "edited": _draft(workspace, "Zeroed Gradients", 1, "Reading `src/optim.py:3`."),
        "unwanted": _draft(workspace, "Nothing New", 2, "Reading `src/train.py:1`."),
    }


def _section(page, draft_id: str):
    return page.locator(f"section.draft[data-id='{draft_id}']")


def test_drafts_are_shown_safely_with_their_moments_and_accepted_through_the_checks(
    page, server, workspace, saved
):
    journal = workspace.root / "learning_journal.md"
    folder = workspace.root / ".journal" / "drafts"
    # The user edits a draft after it was saved: a reference past the end of the file.
    edited = folder / f"{saved['edited']}.md"
    edited.write_text(edited.read_text().replace("src/optim.py:3", "src/optim.py:30"))

    page.goto(server.url)
    page.goto(f"{server.origin}/inbox.html")
    page.wait_for_selector("section.draft")
    assert page.locator("section.draft").count() == 3
    good = _section(page, saved["good"])
    assert good.locator(".text h2").inner_text() == "Warm-up Steps (2026-11-26)"
    assert "<script>" in good.inner_text() and page.evaluate("window.pwned === undefined")
    assert good.locator("a.ref").get_attribute("href").endswith("code/src/train.py.html#L7-7")
    assert MOMENTS[0] in good.locator(".from").inner_text()

    before = journal.read_bytes()
    refused = _section(page, saved["edited"])
    refused.locator("button.accept").click()
    page.wait_for_selector(f"section.draft.refused[data-id='{saved['edited']}']")
    assert refused.locator(".outcome").inner_text().startswith("Not appended: 1 problem(s).")
    assert "src/optim.py:30" in refused.locator("ul.problems").inner_text()
    assert refused.locator("button.accept").is_enabled()
    assert journal.read_bytes() == before and edited.exists()  # nothing appended, draft kept
    refused.scroll_into_view_if_needed()
    screenshot(page, "inbox-drafts")

    good.locator("button.accept").click()
    page.wait_for_selector(f"section.draft.done[data-id='{saved['good']}']")
    outcome = good.locator(".outcome").inner_text()
    assert outcome.startswith(f"Appended {saved['good']} at learning_journal.md:")
    assert "## Warm-up Steps (2026-11-26)" in journal.read_text()
    assert not (folder / f"{saved['good']}.md").exists()
    # Its moment is marked written, as `inbox accept-draft` marks it.
    assert MOMENTS[0] not in [m.text for m in read_inbox(workspace.root)]


def test_reject_deletes_the_draft_and_its_moment_keeps_waiting(page, server, workspace, saved):
    journal = workspace.root / "learning_journal.md"
    before = journal.read_bytes()
    page.goto(server.url)
    page.goto(f"{server.origin}/inbox.html")
    unwanted = _section(page, saved["unwanted"])
    unwanted.locator("button.reject").click()
    page.wait_for_selector(f"section.draft.done[data-id='{saved['unwanted']}']")
    assert unwanted.locator(".outcome").inner_text().startswith("Rejected")
    assert saved["unwanted"] not in [d.id for d in drafts.list_drafts(workspace.root)]
    assert MOMENTS[2] in [m.text for m in read_inbox(workspace.root)]
    assert journal.read_bytes() == before


def test_draft_writes_need_our_origin_the_csrf_token_and_a_full_id(server, workspace, saved):
    journal = workspace.root / "learning_journal.md"
    before = journal.read_bytes()
    draft_id = saved["edited"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    csrf = csrf_of(server)
    body = f"id={draft_id}&action=reject"
    for headers in (
        {**form, "Origin": "http://evil.example", "X-CSRF-Token": csrf},
        {**form, "Origin": server.origin},  # no CSRF token
    ):
        response, _ = request(server, "/api/drafts", method="POST", headers=headers, body=body)
        assert response.status == 403, headers
    ours = {**form, "Origin": server.origin, "X-CSRF-Token": csrf}
    # A number or a prefix could name another draft by the time it acts: only a full id.
    for key in ("1", draft_id[:8]):
        response, data = request(
            server, "/api/drafts", method="POST", headers=ours, body=f"id={key}&action=accept"
        )
        assert response.status == 400 and "reload the inbox" in data, key
    assert draft_id in [d.id for d in drafts.list_drafts(workspace.root)]
    assert journal.read_bytes() == before
