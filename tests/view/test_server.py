"""The server's guard, tried with the attacks it exists for: a wrong token, a foreign Host
(DNS rebinding), a cross-origin or token-less write, paths out of the workspace and secrets.
Each attack is checked for having had no effect, not only for its status code."""

from __future__ import annotations

import html
import http.client
import json
import os
import re
import shutil
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from tests.conftest import CLI
from tests.view.conftest import SECRET, start_server, stop_server


def request(server, path, *, host=None, cookie=True, method="GET", headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sent = {"Host": host or f"127.0.0.1:{server.port}", **(headers or {})}
    if cookie:
        sent["Cookie"] = f"journal_agent_view_{server.port}={server.token}"
    conn.request(method, path, body=body, headers=sent)
    response = conn.getresponse()
    data = response.read().decode("utf-8", "replace")
    conn.close()
    return response, data


def csrf_of(server) -> str:
    _, page = request(server, "/review.html")
    return re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)


def test_the_opening_address_sets_a_cookie_and_drops_the_token(server):
    response, _ = request(server, f"/index.html?token={server.token}", cookie=False)
    assert response.status == 303
    assert response.getheader("location") == "/index.html"
    cookie = response.getheader("set-cookie")
    assert f"={server.token}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie


@pytest.mark.parametrize("path", ["/index.html", "/index.html?token=wrong", "/api/search?q=zero"])
def test_a_wrong_or_missing_token_is_refused(server, path):
    response, body = request(server, path, cookie=False)
    assert response.status == 403
    assert "Gradient Accumulation" not in body and "token" in body


def test_a_foreign_host_is_refused_even_with_the_token(server):
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1:1"):
        response, body = request(server, "/index.html", host=host)
        assert response.status == 403, host
        assert "Gradient Accumulation" not in body


def test_pages_carry_a_strict_content_security_policy(server):
    response, _ = request(server, "/index.html")
    assert response.status == 200
    csp = response.getheader("content-security-policy")
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.getheader("x-content-type-options") == "nosniff"


def _reviews(workspace) -> bytes:
    path = workspace.root / ".journal" / "review.json"
    return path.read_bytes() if path.exists() else b""


def test_writes_need_our_origin_and_the_csrf_token(server, workspace):
    body = f"id=entry:{workspace.ids['zero']}&rating=easy"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    ours = {"Origin": server.origin, "X-CSRF-Token": csrf_of(server)}
    before = _reviews(workspace)
    attacks = [
        {**form, "Origin": "http://evil.example", "X-CSRF-Token": ours["X-CSRF-Token"]},
        {**form, "X-CSRF-Token": ours["X-CSRF-Token"]},  # no Origin at all
        {**form, "Origin": server.origin},  # no CSRF token
        {**form, "Origin": server.origin, "X-CSRF-Token": "guessed"},
    ]
    for headers in attacks:
        response, _ = request(server, "/api/review", method="POST", headers=headers, body=body)
        assert response.status == 403, headers
    assert _reviews(workspace) == before  # nothing was rated
    response, data = request(
        server, "/api/review", method="POST", headers={**form, **ours}, body=body
    )
    assert response.status == 200, data
    assert _reviews(workspace) != before


def test_paths_outside_the_workspace_and_secrets_are_never_served(server, workspace, tmp_path):
    outside = workspace.root.parent / "outside.txt"
    outside.write_text("the neighbour's diary\n")
    # A remote URL with a token in it: git's own files are never shown.
    (workspace.root / ".git").mkdir(exist_ok=True)
    (workspace.root / ".git" / "config").write_text(f"[remote]\n\turl = {SECRET.strip()}\n")
    link = workspace.root / "src" / "innocent.py"
    if not link.exists():
        os.symlink(outside, link)
    paths = [
        "/code/..%2Foutside.txt.html",
        "/code/%2Fetc%2Fpasswd.html",
        "/code/src/..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd.html",
        "/code/src/innocent.py.html",  # a symlink inside that leads out
        "/code/conf/.env.html",  # a secret by the sandbox's rules
        "/code/.git/config.html",
        "/code/src/..%2F.git%2Fconfig.html",
        "/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/entries/..%2F..%2Flearning_journal.md",
    ]
    for path in paths:
        response, body = request(server, path)
        assert response.status in (403, 404), path
        assert "diary" not in body and "root:" not in body and SECRET.strip() not in body, path
    response, body = request(server, "/code/src/train.py.html")
    assert response.status == 200 and "loss.backward()" in body
    shutil.rmtree(workspace.root / ".git")  # the workspace is shared by this module's tests


def test_search_speaks_json_and_says_what_is_wrong(server):
    response, body = request(server, "/api/search?q=%22unbalanced")
    assert response.status in (200, 400)
    response, body = request(server, "/api/search?q=gradient")
    assert response.status == 200 and "Gradient Accumulation" in body


def test_search_gives_the_clis_list_and_words_first(server, workspace):
    """The list the page ends with is `journal search`'s; the first answer, by words alone."""
    import json

    from journal_agent.journal.search import ranking
    from journal_agent.journal.search.index import SearchIndex

    differ = 0
    for query in (
        "gradient",
        "accumulate micro",
        "why does training run out of memory",
        "#security",
    ):
        words = [w for w in query.split() if not w.startswith("#")]
        tags = [w[1:] for w in query.split() if w.startswith("#")]
        path = f"/api/search?q={quote(query)}"
        response, body = request(server, path)
        assert response.status == 200
        served = [h["id"] for h in json.loads(body)["hits"]]
        expected = CLI().json("journal", "search", *query.split(), "--root", str(workspace.root))
        assert served == [h["id"] for h in expected], query
        response, body = request(server, path + "&words=1")
        by_words = ranking.search(SearchIndex(workspace.root), " ".join(words), tags, 10, False)
        assert [h["id"] for h in json.loads(body)["hits"]] == [h.id for h in by_words], query
        differ += served != [h.id for h in by_words]
    assert differ  # meaning reorders one of them: the two answers are not the same search


# What the pages never need; each would add tens of MB to the server (torch alone ≈ 300 MB).
HEAVY = {"torch", "transformers", "sentence_transformers", "matplotlib"}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_the_server_imports_nothing_heavy_and_maps_no_model_file(workspace, tmp_path):
    """After every kind of page and a search by meaning, the server has imported none of
    torch, transformers, sentence-transformers or matplotlib (Python's own import log says
    what it imported), and keeps no mapping of the model's weights file: mapped, the file's
    pages counted in the server's memory as the kernel happened to cache them (a whole 2 MB
    folio per word looked up: up to 215 MB instead of 161 at 10,000 entries)."""
    import json

    from journal_agent.journal.search.embeddings import find_model

    log = tmp_path / "imports.log"
    server = start_server(workspace.root, env={"PYTHONPROFILEIMPORTTIME": "1"}, stderr=log)
    try:
        ids = workspace.ids
        paths = [
            "/index.html",
            f"/entries/{ids['zero']}.html",
            f"/entries/{ids['accum']}.html",
            "/code/src/train.py.html",
            f"/records/{workspace.trace_id}.html",
            f"/records/{workspace.estimate_id}.html",
            "/tags/memory.html",
            "/ledger.html",
            "/review.html",
            "/inbox.html",
            f"/api/related?id={ids['zero']}",
        ]
        for path in paths:
            response, _ = request(server, path)
            assert response.status == 200, path
        response, body = request(server, "/api/search?q=why+does+sharding+save+memory")
        assert response.status == 200 and json.loads(body)["note"] is None  # meaning was used
        maps = (Path("/proc") / str(server.process.pid) / "maps").read_text()
    finally:
        stop_server(server)
    weights = find_model(workspace.root).weights.resolve()
    assert str(weights) not in maps
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in log.read_text().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert {"numpy", "tokenizers", "starlette"} <= imported  # the log is read, meaning ran
    assert not imported & HEAVY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_and_host_options(workspace):
    port = _free_port()
    chosen = start_server(workspace.root, "--port", str(port))
    try:
        assert urlsplit(chosen.url).port == port
        assert urlsplit(chosen.url).hostname == "127.0.0.1"
    finally:
        stop_server(chosen)
    wide = start_server(workspace.root, "--host", "0.0.0.0")
    try:
        # Reached by one of this machine's own addresses: served; by a domain name: refused.
        own = next(a for a in _own_ipv4() if not a.startswith("127."))
        response, _ = request(wide, "/index.html", host=f"{own}:{wide.port}")
        assert response.status == 200
        response, _ = request(wide, "/index.html", host=f"rebound.example:{wide.port}")
        assert response.status == 403
    finally:
        stop_server(wide)
    assert "warning: listening on 0.0.0.0" in wide.process.stderr.read()


def _own_ipv4() -> list[str]:
    import psutil

    found = [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET
    ]
    if not any(not a.startswith("127.") for a in found):
        pytest.skip("this machine has no address but loopback")
    return found


def test_the_stamp_tells_nothing_of_files_outside_or_secret(server, workspace):
    """A page asks whether the files it shows changed (api/stamp?file=…): for a path out of
    the workspace or a secret the answer never changes, whatever happens to that file."""
    outside = workspace.root.parent / "watched-outside.txt"
    secret = workspace.root / "conf" / ".env"
    asked = "/api/stamp?file=..%2Fwatched-outside.txt&file=conf%2F.env&file=%2Fetc%2Fhostname"

    def stamp() -> str:
        response, body = request(server, asked)
        assert response.status == 200
        return body

    before = stamp()
    outside.write_text("now it exists\n")
    secret.write_text(SECRET + "MORE=1\n")
    try:
        assert stamp() == before
    finally:
        outside.unlink()
        secret.write_text(SECRET)
    # A workspace file is watched: touched, its stamp changes.
    train = workspace.root / "src" / "train.py"
    _, shown = request(server, "/api/stamp?file=src%2Ftrain.py")
    st = train.stat()
    os.utime(train, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    _, touched = request(server, "/api/stamp?file=src%2Ftrain.py")
    assert touched != shown


def _open_files(server) -> list[str]:
    fds = Path("/proc") / str(server.process.pid) / "fd"
    out = []
    for fd in fds.iterdir():
        try:
            out.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return out


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc (Linux)")
def test_what_is_no_page_gets_the_views_error_page(server, workspace):
    """A directory, a missing file, an unknown address, a page number out of range, a wrong
    method: each answers the view's own page (styled at any depth, one sentence), never a
    crash, and a directory asked for leaves no descriptor open."""
    cases = {
        "/code/src.html": (404, "src is a directory"),
        "/code/src/.html": (404, "is a directory"),
        "/code/src/nothing-here.py.html": (404, "no such file in the workspace"),
        "/no/such/page": (404, "there is no page /no/such/page"),
        "/records/nothing.json": (404, "there is no page"),
        "/pages/0.html": (404, "the journal has 1 page(s), not 0"),
        "/api/review": (405, "does not take a GET request"),
    }
    for path, (status, said) in cases.items():
        response, body = request(server, path)
        assert response.status == status, (path, body)
        assert response.getheader("content-type", "").startswith("text/html"), path
        assert said in html.unescape(body), (path, body)
        depth = path.count("/") - 1
        assert f'href="{"../" * depth}static/view.css"' in body, path  # the page is styled
        assert "script-src 'self'" in response.getheader("content-security-policy", "")
    src = str((workspace.root / "src").resolve())
    assert src not in _open_files(server)  # fdopen refused the directory: closed by us


def test_an_address_it_cannot_listen_on_is_one_sentence_and_the_right_advice(workspace):
    """A port in use names --port; a host that is no address of this machine names --host.
    Exit 1, no traceback, the journal untouched."""
    journal = workspace.root / "learning_journal.md"
    before = journal.read_bytes()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        in_use = CLI()("view", "--no-open", "--port", str(port), "--root", str(workspace.root))
    assert in_use.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in in_use.stderr
    assert "another --port" in in_use.stderr and "Traceback" not in in_use.stderr
    for host in ("no-such-host.invalid", "192.0.2.1"):  # unresolvable; TEST-NET, not ours
        wrong = CLI()("view", "--no-open", "--host", host, "--root", str(workspace.root))
        assert wrong.returncode == 1, host
        assert f"cannot listen on {host} (" in wrong.stderr, wrong.stderr
        assert "--host an address of this machine" in wrong.stderr, wrong.stderr
        assert "--port" not in wrong.stderr and "Traceback" not in wrong.stderr
    assert journal.read_bytes() == before


def test_an_entry_links_its_tags_to_their_pages(server, workspace):
    """Entries by tag: from an entry, each of its tags opens the list of entries under it."""
    _, body = request(server, f"/entries/{workspace.ids['accum']}.html")
    links = re.findall(r'<a class="tag" href="\.\./(tags/[^"]+)">#([^<]+)</a>', body)
    assert [tag for _, tag in links] == ["memory", "training"]
    for path, _ in links:
        response, page = request(server, f"/{path}")
        assert response.status == 200 and "Gradient Accumulation" in page, path


def test_a_cited_secret_shows_nothing_not_even_whether_it_changed(server, workspace):
    """conf/.env is cited by an entry: the page lists the reference, hidden, with no link and
    no state read from its contents (fresh or changed would tell the secret changed)."""
    _, body = request(server, f"/entries/{workspace.ids['zero']}.html")
    item = re.search(r"<li>(?:(?!</li>).)*conf/\.env:1(?:(?!</li>).)*</li>", body, re.S)
    assert item is not None
    shown = html.unescape(re.sub(r"<[^>]+>", " ", item.group(0)))
    assert "hidden" in shown and "not shown: a secret or denied file" in shown
    assert not re.search(r"fresh|changed|moved|unchanged", shown), shown
    assert "conf/.env" not in "".join(re.findall(r'href="([^"]*)"', body))


def test_a_page_opened_without_the_token_says_what_to_do_in_a_page_not_json(server):
    """#33: a browser that lost the cookie got raw JSON; it gets a page saying to open the
    address the command printed. The API keeps answering in JSON."""
    response, body = request(server, "/entries/x.html", cookie=False)
    assert response.status == 403
    assert response.getheader("content-type").startswith("text/html")
    assert "<h1>journal-agent view</h1>" in body and "open that address again" in body
    assert "Gradient Accumulation" not in body and not body.lstrip().startswith("{")
    response, body = request(server, "/api/search?q=zero", cookie=False)
    assert response.getheader("content-type") == "application/json"
    assert json.loads(body)["error"].startswith("wrong or missing token")


def test_a_moments_references_and_citations_are_links(server, workspace):
    """#33: `file:line` and `[m:id]` in a moment's text were plain text."""
    from journal_agent.capture.store import append, new_moment

    cited = f"The traced peak is in the optimizer step [m:{workspace.trace_id}]."
    append(workspace.root, [new_moment("insight", cited)])
    _, body = request(server, "/inbox.html")
    texts = "".join(re.findall(r'<div class="text">(.*?)</div>', body, re.S))
    assert re.search(r'<a [^>]*href="code/src/train\.py\.html#L6"[^>]*>src/train\.py:6</a>', texts)
    record = workspace.trace_id
    assert re.search(rf'<a [^>]*href="records/{record}\.html"[^>]*>\[m:{record}\]</a>', texts)


def test_the_records_page_lists_every_record_with_its_headline_and_what_cites_it(
    server, workspace, tmp_path
):
    """#33: a record nothing cited could not be found in the view (records were reached only
    through an entry's or a moment's [m:id]); now one page lists them all, newest first."""
    from profiling import estimate_memory
    from profiling.estimate.record import estimate_record
    from profiling.records import RecordStore

    store = RecordStore(workspace.root / ".journal" / "measurements")
    alone = store.save(estimate_record(estimate_memory(model="gpt2-small", gpu_mem=1)))
    try:
        _records_page_lists(server, workspace, tmp_path, alone)
    finally:  # the workspace is the module's: leave it as the other tests know it
        (workspace.root / ".journal" / "measurements" / f"{alone}.json").unlink()


def _records_page_lists(server, workspace, tmp_path, alone: str) -> None:
    response, body = request(server, "/records.html")
    assert response.status == 200
    rows = re.findall(r"<tr class=\"kind-[a-z]+\">(.*?)</tr>", body, re.S)
    ids = [re.search(r"\[m:([\w-]+)\]", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert ids[0] == alone and {workspace.trace_id, workspace.estimate_id} <= set(ids)
    by_id = dict(zip(ids, rows, strict=True))
    assert f'href="records/{alone}.html"' in by_id[alone]
    assert "❌ <strong>" in by_id[alone] and "per GPU" in by_id[alone]  # over 1 GB: its verdict
    assert by_id[alone].rstrip().endswith("<td>nothing</td>")
    assert "learning_journal.md" in by_id[workspace.trace_id]
    _, index = request(server, "/index.html")
    assert 'href="records.html">Records</a>' in index
    out = tmp_path / "site"
    done = CLI()("export", "html", str(out), "--root", str(workspace.root))
    assert done.returncode == 0, done.stderr
    exported = (out / "records.html").read_text()
    assert f'href="records/{alone}.html"' in exported and (out / f"records/{alone}.html").exists()
