"""The view in a real browser (headless Chromium): click through, search as you type, review a
card, hostile entries, live reload. The screenshots in docs/img/ are made here."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CLI
from tests.entries import render_entry
from tests.view.conftest import HOSTILE_TITLE, screenshot

pytestmark = pytest.mark.slow


def test_journal_entry_code_record_plot(page, server, workspace):
    page.goto(server.url)
    assert page.url == f"{server.origin}/index.html"  # the token left the address bar
    page.wait_for_selector("text=Gradient Accumulation")
    screenshot(page, "journal")

    page.click("a.entry-link:has-text('ZeRO Stage 2')")
    page.wait_for_selector("article.entry h2:has-text('ZeRO Stage 2')")
    states = [s.lower() for s in page.locator("ul.refs li").all_inner_texts()]
    assert any(s.startswith("moved") and "src/train.py:5-6" in s for s in states), states
    assert any(s.startswith("changed") and "src/optim.py:2" in s for s in states), states
    assert any(s.startswith("gone") and "src/gone.py:1" in s for s in states), states
    # A secret file's reference is listed but never linked.
    assert page.locator("ul.refs a:has-text('conf/.env')").count() == 0
    assert "not shown" in page.locator("ul.refs li", has_text="conf/.env").inner_text()
    aside = page.locator("aside")
    assert "Gradient Accumulation" in aside.locator("h2:has-text('Linked from') + ul").inner_text()
    page.wait_for_selector("#related li")  # asked for once the page is shown
    assert "Gradient Accumulation" in aside.locator("#related").inner_text()
    screenshot(page, "entry")

    # The moved reference opens the lines where they are now, highlighted.
    page.click("article.entry a.ref-moved")
    page.wait_for_selector("table.code tr.hl")  # the script marks the cited lines once loaded
    highlighted = page.locator("table.code tr.hl td.src").all_inner_texts()
    assert [line.strip() for line in highlighted] == ["loss = model(batch)", "loss.backward()"]
    assert page.locator("table.citing tr.hl").count() == 1
    screenshot(page, "code")

    page.go_back()
    page.click(f"article.entry a.cite:has-text('m:{workspace.trace_id}')")
    page.wait_for_selector("svg.chart")
    assert page.locator("svg.chart").count() == 2  # breakdown by category, memory by phase
    assert page.locator("svg.chart .peak").count() == 1  # the peak is marked
    assert "peak" in page.locator("svg.chart .peaklbl").text_content()
    assert page.locator("table.modules tbody tr").count() > 0
    provenance = page.locator("table.kv").last.inner_text()
    assert "torch" in provenance  # the versions
    assert "journal-agent trace --model tiny-gpt2 --batch 2 --seq 32" in provenance  # command
    screenshot(page, "record")

    page.goto(f"{server.origin}/records/{workspace.estimate_id}.html")
    assert page.locator("table.steps tbody tr").count() > 3  # the calculation, step by step
    screenshot(page, "estimate")


def test_search_as_you_type(page, server):
    page.goto(server.url)
    page.fill("#search", "")
    page.type("#search", "accumulate micro", delay=20)
    # Words answer first, then the CLI's list replaces them: wait for the final one.
    page.wait_for_selector("#results[data-done='accumulate micro'] a.hit")
    assert page.locator("#results a.hit").first.inner_text() == "Gradient Accumulation"
    assert page.locator("#listing").is_hidden()
    screenshot(page, "search")
    page.fill("#search", "#security")
    page.wait_for_selector(f"#results a.hit:has-text('{HOSTILE_TITLE}')")
    page.fill("#search", "")
    page.wait_for_selector("#listing", state="visible")


def test_review_a_card_reaches_the_fsrs_store(page, server, workspace):
    page.goto(server.url)
    page.click("nav a:has-text('Review')")
    card = page.locator(f"section.card[data-id='entry:{workspace.ids['accum']}']")
    card.locator("button.show").click()
    screenshot(page, "review")
    card.locator("button.rating-good").click()
    page.wait_for_selector(f"section.card.done[data-id='entry:{workspace.ids['accum']}']")
    assert "Rated good" in card.locator(".rated").inner_text()
    listed = CLI().json("review", "--list", "--all", "--root", str(workspace.root))
    mine = next(c for c in listed if c["id"] == f"entry:{workspace.ids['accum']}")
    assert mine["reviews"] == 1 and mine["state"] != "new"


def test_ledger_page(page, server):
    page.goto(server.url)
    page.click("nav a:has-text('Ledger')")
    page.wait_for_selector("h1:has-text('CS336 Learning Ledger')")
    assert page.locator(".level").count() == 3
    assert page.locator("table.sessions tbody tr").count() >= 3
    screenshot(page, "ledger")


def test_hostile_entry_shows_text_and_runs_nothing(page, server, workspace):
    page.goto(server.url)
    page.goto(f"{server.origin}/entries/{workspace.ids['hostile']}.html")
    article = page.locator("article.entry")
    text = article.inner_text()
    assert "<script>window.pwned = 'script'</script>" in text
    assert "onerror" in text
    assert page.evaluate("window.pwned === undefined")
    assert page.dialogs == []
    hrefs = article.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.split(":")[0].lower() in ("javascript", "data")]
    assert article.locator("script, img").count() == 0


def test_the_page_follows_the_journal(page, server, workspace):
    page.goto(server.url)
    page.wait_for_selector("text=Gradient Accumulation")
    entry = render_entry(
        "Activation Checkpointing",
        "2026-11-23",
        context="Reading `src/train.py:6`.",
        question="What does recomputation cost?",
        intuition="One more forward.",
        tags="#memory",
    )
    done = CLI()("journal", "append", "-", "--root", str(workspace.root), input=entry)
    assert done.returncode == 0, done.stderr
    page.wait_for_selector("text=Activation Checkpointing", timeout=30_000)  # no reload by us


def test_exported_site_works_from_file_urls(page, workspace, tmp_path):
    out = tmp_path / "site"
    CLI()("export", "html", str(out), "--root", str(workspace.root), check=True)
    page.goto((out / "index.html").as_uri())
    page.click("a.entry-link:has-text('ZeRO Stage 2')")
    page.wait_for_selector("article.entry")
    page.click("article.entry a.ref-moved")
    page.wait_for_selector("table.code tr.hl")
    page.go_back()
    page.click(f"article.entry a.cite:has-text('m:{workspace.trace_id}')")
    page.wait_for_selector("svg.chart .peak")
    page.goto((out / "index.html").as_uri())
    page.type("#search", "gradient", delay=20)
    page.wait_for_selector("#results a.hit:has-text('Gradient Accumulation')")
    assert not (out / "code" / "conf" / ".env.html").exists()
    assert json.dumps(page.dialogs) == "[]"


def _cited_step(tmp_path):
    """A workspace whose one entry cites ``src/step.py:2``: (its root, that file)."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    code = root / "src" / "step.py"
    code.write_text("def step(opt):\n    opt.step()\n")
    entry = render_entry(
        "Optimizer Step",
        "2026-11-24",
        context="Reading `src/step.py:2`.",
        question="When are the weights updated?",
        intuition="At opt.step().",
        tags="#optim",
    )
    CLI()("journal", "append", "-", "--root", str(root), input=entry, check=True)
    return root, code


def test_the_page_follows_the_code_it_cites(page, tmp_path):
    """An entry's reference states and a code page's lines are read from the workspace's
    files: editing a cited file reloads the page open on it, as appending an entry does."""
    from tests.view.conftest import start_server, stop_server

    root, code = _cited_step(tmp_path)
    server = start_server(root)
    try:
        page.goto(server.url)
        # The page's first question (did anything change?) leaves after the edit: a page
        # compares with the files it was made from, not with the first answer.
        page.add_init_script(HOLD_STAMP)
        page.click("a.entry-link:has-text('Optimizer Step')")
        page.wait_for_selector("ul.refs .state-fresh")
        code.write_text("# the step\ndef step(opt):\n    opt.step()\n")
        page.evaluate("() => window.letStampsGo()")
        page.wait_for_selector("ul.refs .state-moved", timeout=30_000)  # no reload by us
        assert "now at line 3" in page.locator("ul.refs li").inner_text()
        page.click("article.entry a.ref-moved")
        page.wait_for_selector("table.code tr.hl")
        code.write_text("# the step\ndef step(opt):\n    opt.step()\n    opt.zero_grad()\n")
        page.evaluate("() => window.letStampsGo()")  # held on this page too
        page.wait_for_selector("td.src:has-text('opt.zero_grad()')", timeout=30_000)
    finally:
        stop_server(server)


def test_an_edit_made_while_the_page_loads_reloads_it(page, tmp_path):
    """The page's baseline is what it was made from, not its first poll: the file is edited
    after the server rendered the code page and before the page's first api/stamp answer."""
    from tests.view.conftest import start_server, stop_server

    root, code = _cited_step(tmp_path)
    server = start_server(root)
    edited: list[str] = []

    def edit_then_answer(route):
        # The code page's first poll: the server has rendered it, its answer is not yet back.
        if not edited and "/code/" in route.request.frame.url:
            code.write_text("def step(opt):\n    opt.step()\n    opt.zero_grad()\n")
            edited.append(route.request.url)
        route.continue_()

    try:
        page.route("**/api/stamp*", edit_then_answer)
        page.goto(server.url)
        page.click("a.entry-link:has-text('Optimizer Step')")
        page.click("ul.refs a.ref")
        page.wait_for_selector("td.src:has-text('opt.zero_grad()')", timeout=30_000)
        assert edited
    finally:
        stop_server(server)


HOLD_STAMP = """
const realFetch = window.fetch.bind(window);
const held = [];
let free = false;
window.fetch = (url, options) => !free && String(url).includes("api/stamp")
  ? new Promise((resolve) => held.push(() => resolve(realFetch(url, options))))
  : realFetch(url, options);
window.letStampsGo = () => { free = true; for (const go of held.splice(0)) go(); };
"""


def test_no_page_asks_for_what_the_server_lacks(page, server, workspace):
    """Every request a page makes (its style sheet, script, icon, API calls) is answered:
    a browser asks for /favicon.ico unless the page names its icon."""
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # The icon's request is the browser's own: Playwright reports it only as a console error.
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    page.goto(server.url)
    for path in (
        "index.html",
        f"entries/{workspace.ids['zero']}.html",
        f"records/{workspace.trace_id}.html",
        "ledger.html",
        "review.html",
        "inbox.html",
    ):
        page.goto(f"{server.origin}/{path}")
        page.wait_for_load_state("networkidle")
    assert failed == []


def test_clearing_the_search_drops_the_answer_on_its_way(page, server):
    """The box emptied while an answer is on its way: the journal's list comes back and
    stays, the late answer does not replace it with hits for a query no longer there."""
    # The page's requests to api/search wait until the test lets them go.
    page.add_init_script(HOLD_SEARCH)
    page.goto(server.url)
    page.type("#search", "gradient")
    page.wait_for_function("() => window.heldSearches.length > 0")  # after the page's debounce
    page.fill("#search", "")
    page.wait_for_selector("#listing", state="visible")
    # The answer arrives; once its body is read, the page has decided what to do with it.
    page.evaluate("() => window.letSearchesGo()")
    assert page.locator("#listing").is_visible()
    assert page.locator("#results").is_hidden()


HOLD_SEARCH = """
const realFetch = window.fetch.bind(window);
window.heldSearches = [];
window.fetch = (url, options) => String(url).includes("api/search")
  ? new Promise((resolve) => window.heldSearches.push(() => {
      const answer = realFetch(url, options);
      resolve(answer);
      return answer.then((response) => response.clone().text());
    }))
  : realFetch(url, options);
window.letSearchesGo = async () => {
  await Promise.all(window.heldSearches.splice(0).map((go) => go()));
  await new Promise((done) => setTimeout(done, 0));
};
"""


def test_following_the_journal_keeps_the_query_being_typed(page, tmp_path):
    """An entry appended while a search is in the box: the query stays and is asked again
    (the new entry appears among the hits); once the box is emptied, the page reloads."""
    from tests.view.conftest import start_server, stop_server

    root = tmp_path / "project"
    root.mkdir()

    def append(title: str, intuition: str) -> None:
        text = render_entry(
            title, "2026-11-25", context="c", question="q?", intuition=intuition, tags="#amp"
        )
        CLI()("journal", "append", "-", "--force", "--root", str(root), input=text, check=True)

    append("Mixed Precision", "bf16 weights keep an fp32 master copy.")
    server = start_server(root)
    try:
        page.goto(server.url)
        page.type("#search", "loss scaling", delay=20)
        page.wait_for_selector("#results[data-done='loss scaling']", state="attached")
        append("Dynamic Loss Scaling", "fp16 gradients underflow without loss scaling.")
        page.wait_for_selector("#results a.hit:has-text('Dynamic Loss Scaling')", timeout=30_000)
        assert page.input_value("#search") == "loss scaling"
        page.fill("#search", "")
        page.wait_for_selector("#listing a.entry-link:has-text('Dynamic Loss Scaling')")
    finally:
        stop_server(server)
