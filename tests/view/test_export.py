"""`export html|anki|json`: what lands in the files, read back the way their users read them
(the Anki package as Anki opens it: a zip holding a SQLite collection)."""

from __future__ import annotations

import json
import sqlite3
import zipfile

from tests.view.conftest import SECRET


def test_export_json_holds_entries_states_records_ledger_and_cards(cli, workspace, tmp_path):
    out = tmp_path / "journal.json"
    cli("export", "json", str(out), "--root", str(workspace.root), check=True)
    data = json.loads(out.read_text())
    zero = next(e for e in data["entries"] if e["id"] == workspace.ids["zero"])
    states = {r["ref"]: r["state"] for r in zero["refs"]}
    assert states["src/train.py:5-6"] == "moved"
    assert states["src/optim.py:2"] == "changed"
    assert states["src/gone.py:1"] == "gone"
    assert states["conf/.env:1"] == "hidden"  # a secret: not even whether it changed
    assert workspace.trace_id in zero["citations"]
    assert zero["backlinks"] == [workspace.ids["accum"]]
    assert {r["id"] for r in data["records"]} >= {workspace.trace_id, workspace.estimate_id}
    assert data["ledger"]["title"] == "CS336 Learning Ledger"
    assert any(c["id"] == f"entry:{workspace.ids['zero']}" for c in data["review"])


def test_export_json_written_in_pieces_is_the_whole_document_byte_for_byte(
    cli, workspace, tmp_path
):
    # The CLI writes the document an entry at a time (a 100 MB journal's entries are never
    # held): the file and standard output are exactly json.dumps of the whole, as before.
    from journal_agent.view.export import export_json
    from journal_agent.workspace import Workspace

    whole = json.dumps(
        export_json(Workspace(workspace.root)), indent=2, ensure_ascii=False, default=str
    )
    out = tmp_path / "journal.json"
    done = cli("export", "json", str(out), "--root", str(workspace.root), check=True)
    assert out.read_text(encoding="utf-8") == whole
    assert f"wrote {len(json.loads(whole)['entries'])} entries" in done.stdout
    shown = cli("export", "json", "--root", str(workspace.root), check=True)
    assert shown.stdout == whole + "\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = tmp_path / "nothing.json"
    cli("export", "json", str(nothing), "--root", str(empty), check=True)
    assert nothing.read_text() == json.dumps(
        export_json(Workspace(empty)), indent=2, ensure_ascii=False, default=str
    )
    assert json.loads(nothing.read_text())["entries"] == []


def test_export_anki_puts_the_cited_code_on_the_back(cli, workspace, tmp_path):
    deck = tmp_path / "journal.apkg"
    done = cli("export", "anki", str(deck), "--root", str(workspace.root), check=True)
    count = int(done.stdout.split()[1])
    with zipfile.ZipFile(deck) as package:
        (tmp_path / "collection.anki2").write_bytes(package.read("collection.anki2"))
    conn = sqlite3.connect(tmp_path / "collection.anki2")
    notes = [row[0].split("\x1f") for row in conn.execute("SELECT flds FROM notes")]
    conn.close()
    assert len(notes) == count > 3
    zero = next(n for n in notes if "sharding gradients" in n[0])
    assert "loss.backward()" in zero[2]  # the moved lines' file, at the cited lines
    assert "src/train.py:5-6" in zero[2]
    assert all(SECRET.strip() not in "".join(n) for n in notes)  # conf/.env is never read
    hostile = next(n for n in notes if "javascript:" in n[0])
    assert "<a " not in hostile[0] and "<script" not in "".join(hostile)


def test_export_html_refuses_a_directory_that_holds_files(cli, workspace, tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    done = cli("export", "html", str(target), "--root", str(workspace.root))
    assert done.returncode == 1
    assert "not an empty directory" in done.stderr and "Traceback" not in done.stderr
    assert (target / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]


def test_a_failed_export_leaves_no_half_site(cli, tmp_path):
    """The ledger is read after the entry pages are written: when it cannot be, the export
    says why in one sentence and leaves nothing behind — a new DIR is not made, an empty DIR
    stays empty — so running it again once fixed just works."""
    from tests.entries import render_entry

    root = tmp_path / "project"
    root.mkdir()
    entry = render_entry(
        "Loss Scaling", "2026-11-24", context="c", question="q?", intuition="i", tags="#amp"
    )
    cli("journal", "append", "-", "--root", str(root), input=entry, check=True)
    ledger = root / "learning_ledger.md"
    ledger.write_bytes(b"# Ledger\n\n## Mastery\n- caf\xe9\n")  # Latin-1, not UTF-8
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (tmp_path / "new", empty):
        done = cli("export", "html", str(target), "--root", str(root))
        assert done.returncode == 1
        assert "learning_ledger.md is not valid UTF-8" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "new").exists()
    assert list(empty.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "project"]  # no leftovers
    ledger.write_text("# Ledger\n\n## Mastery\n- café\n")
    cli("export", "html", str(empty), "--root", str(root), check=True)
    assert (empty / "index.html").is_file() and (empty / "ledger.html").is_file()


def test_parallel_export_writes_the_same_pages(workspace, tmp_path, monkeypatch):
    # A large journal's entry pages are written by several processes: same files, same bytes.
    from journal_agent.view import export
    from journal_agent.workspace import Workspace

    serial = tmp_path / "serial"
    export.export_html(Workspace(workspace.root), serial)
    monkeypatch.setattr(export, "PARALLEL_FROM", 1)
    monkeypatch.setattr(export, "CHUNK", 1)
    monkeypatch.setattr(export.os, "cpu_count", lambda: 3)
    parallel = tmp_path / "parallel"
    done = export.export_html(Workspace(workspace.root), parallel)

    def pages(root):
        return {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*.html")
            if p.parts[len(root.parts)] in ("entries", "code")
        }

    assert pages(parallel) == pages(serial)
    assert len([p for p in pages(parallel) if p.startswith("entries/")]) >= 3
    assert done.pages == len(list(parallel.rglob("*.html")))


def test_exported_entries_list_the_related_entries_the_live_view_lists(workspace, tmp_path):
    import re

    from journal_agent.view import export
    from journal_agent.view.site import Site, entry_path
    from journal_agent.workspace import Workspace

    out = tmp_path / "site"
    export.export_html(Workspace(workspace.root), out)
    site = Site(Workspace(workspace.root))
    listed = 0
    for entry in site.entries():
        page = (out / entry_path(entry.id)).read_text(encoding="utf-8")
        block = re.search(r'<ul class="related">(.*?)</ul>', page, re.S)
        assert block is not None, entry.id
        exported = re.findall(r'href="([^"]+)"', block.group(1))
        live = [f"../{entry_path(h.id)}" for h in site.related(entry)]  # what api/related gives
        assert exported == live, entry.id
        listed += len(exported)
    assert listed > 0
    zero = (out / entry_path(workspace.ids["zero"])).read_text(encoding="utf-8")
    assert "Gradient Accumulation" in zero.split('<ul class="related">')[1].split("</ul>")[0]


def test_export_anki_and_json_never_write_over_a_file_unless_forced(cli, workspace, tmp_path):
    """#33: `export html` refused a directory that holds files; anki and json overwrote
    silently. Now each keeps what is there (one sentence, exit 1) until --force."""
    for kind, name in (("anki", "deck.apkg"), ("json", "all.json")):
        target = tmp_path / name
        target.write_text("mine")
        refused = cli("export", kind, str(target), "--root", str(workspace.root))
        assert refused.returncode == 1
        assert f"{target} exists; give a new file name, or --force to replace it." in refused.stderr
        assert target.read_text() == "mine"
        link = tmp_path / f"link-{name}"
        link.symlink_to(tmp_path / "elsewhere")
        assert cli("export", kind, str(link), "--root", str(workspace.root)).returncode == 1
        assert not (tmp_path / "elsewhere").exists()  # a dangling link is not followed
        done = cli("export", kind, str(target), "--force", "--root", str(workspace.root))
        assert done.returncode == 0, done.stderr
        assert target.read_bytes() != b"mine"
        fresh = tmp_path / f"new-{name}"
        assert cli("export", kind, str(fresh), "--root", str(workspace.root)).returncode == 0
        assert fresh.stat().st_size > 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no leftovers
