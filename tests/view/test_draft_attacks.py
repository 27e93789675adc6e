"""The inbox page and ``POST /api/drafts`` against drafts a sandboxed command planted in
``.journal/drafts/`` (the one part of ``.journal`` it may write): hostile Markdown and header
fields are shown as text, a planted folder does not break the page, and no draft id — ``..``,
an absolute path, a symlink's name — makes a write reach anything but a listed draft."""

from __future__ import annotations

import json
import re

import pytest

from tests.entries import render_entry
from tests.view.test_server import csrf_of, request

pytestmark = pytest.mark.slow

_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _hostile_entry() -> str:
    return render_entry(
        "Hostile Markdown",
        "2026-11-26",
        context=(
            "[a](javascript:alert(1)) [b](JaVaScRiPt:alert(2)) [c](data:text/html,x) "
            "<img src=x onerror=alert(3)> <a href='javascript:alert(4)'>d</a> "
            "<svg onload=alert(5)> <iframe src=//evil.example></iframe> "
            "[e](&#106;avascript:alert(6)) ![f](javascript:alert(7))"
        ),
        question="Is it shown as text?",
        intuition="Raw HTML is off and only http(s), mailto and relative links are links.",
        tags="#security",
    )


@pytest.fixture(scope="module")
def planted(workspace, tmp_path_factory):
    folder = workspace.root / ".journal" / "drafts"
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "created": "<script>alert('created')</script>",
        "model": "<img src=x onerror=alert('model')>",
        "moments": ["<script>alert('moment')</script>"],
        "run": "\"'><script>alert('run')</script>",
    }
    header = f"<!-- journal-agent draft {json.dumps(meta)} -->\n"
    (folder / "hostile.md").write_text(header + _hostile_entry(), encoding="utf-8")
    (folder / "folder.md").mkdir()  # must not break the page
    outside = tmp_path_factory.mktemp("outside") / "elsewhere.md"
    outside.write_text(
        header
        + render_entry(
            "Outside", "2026-11-26", context="c", question="q", intuition="i", tags="#t"
        ),
        encoding="utf-8",
    )
    (folder / "outside.md").symlink_to(outside)
    return folder, outside


def test_hostile_draft_markdown_and_header_are_shown_as_text(server, planted):
    response, page = request(server, "/inbox.html")
    assert response.status == 200, page
    section = page[page.index('data-id="hostile"') :]
    section = section[: section.index("</section>")]
    assert "Hostile Markdown" in section
    hrefs = re.findall(r'href="([^"]*)"', section)
    assert not [h for h in hrefs if re.match(r"\s*(javascript|data|vbscript):", h, re.I)], hrefs
    assert "<script" not in section and "<img" not in section and "<svg" not in section
    assert "<iframe" not in section and not re.search(r"<[^>]+\son\w+=", section)
    assert 'data-id="outside"' not in page  # a symlink is not a draft


@pytest.mark.parametrize(
    "draft_id",
    [
        "../../learning_journal",
        "..%2F..%2Flearning_journal",
        "/etc/passwd",
        "outside",
        "folder",
        "hostile/../hostile",
        "hostile.md/..",
        "",
    ],
)
def test_no_draft_id_reaches_anything_but_a_listed_draft(server, workspace, planted, draft_id):
    folder, outside = planted
    journal = workspace.root / "learning_journal.md"
    before, outside_before = journal.read_bytes(), outside.read_bytes()
    ours = {**_FORM, "Origin": server.origin, "X-CSRF-Token": csrf_of(server)}
    for action in ("accept", "reject"):
        response, data = request(
            server,
            "/api/drafts",
            method="POST",
            headers=ours,
            body=f"id={draft_id}&action={action}",
        )
        assert response.status == 400, (draft_id, action, data)
    assert journal.read_bytes() == before
    assert outside.read_bytes() == outside_before and (folder / "outside.md").is_symlink()
    assert (folder / "hostile.md").exists() and (folder / "folder.md").is_dir()
