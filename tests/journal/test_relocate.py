"""References that follow the code: moved (found again, fixed in place), changed (a diff; never
fixed, refreshed only when accepted by name) and gone, within a file, across files by content,
and across a git rename."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from journal_agent.journal import api
from journal_agent.tools.journal_check import JournalCheck
from journal_agent.tools.registry import make_context

from .conftest import make_entry

TRAIN = (
    "import torch\n"
    "\n"
    "\n"
    "def build_optimizer(model, lr):\n"
    "    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]\n"
    "    rest = [p for n, p in model.named_parameters() if p.ndim < 2]\n"
    "    groups = [{'params': decay, 'weight_decay': 0.1}, {'params': rest}]\n"
    "    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))\n"
    "\n"
    "\n"
    "def train_step(model, batch, optimizer):\n"
    "    loss = model(**batch).loss\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    optimizer.zero_grad(set_to_none=True)\n"
    "    return loss.item()\n"
)
ENTRY_BODY = "The optimizer is built in `src/train.py:5-8`; the step in `src/train.py:12-15`.\n"


def kinds(report) -> list[str]:
    return sorted(p.kind for p in report.problems)


@pytest.fixture
def appended(ws):
    ws.write("src/train.py", TRAIN)
    outcome = api.append_entry(ws.workspace, make_entry(body=ENTRY_BODY))
    assert outcome.appended and outcome.problems == [], outcome.problems
    assert api.check(ws.workspace).ok
    return ws


def test_a_line_inserted_above_moves_every_reference_and_fix_follows_them(appended):
    ws = appended
    ws.write("src/train.py", '"""Training."""\n' + TRAIN)
    report = api.check(ws.workspace)
    assert kinds(report) == ["moved_ref", "moved_ref"]
    moved = sorted(p.moved_to for p in report.problems)
    assert moved == ["src/train.py:13-16", "src/train.py:6-9"]
    # refresh does not bless the shifted lines (the bug of issue #24): it refuses, nothing recorded
    before = (ws.root / ".journal/refs.jsonl").read_bytes()
    proc = ws.cli("refresh", "1")
    assert proc.returncode == 1 and "check --fix" in proc.stderr
    assert (ws.root / ".journal/refs.jsonl").read_bytes() == before
    journal_before = ws.journal.read_text()
    proc = ws.cli("check", "--fix")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "src/train.py:5-8 → src/train.py:6-9" in proc.stdout
    after = ws.journal.read_text()
    assert after == journal_before.replace("src/train.py:5-8", "src/train.py:6-9").replace(
        "src/train.py:12-15", "src/train.py:13-16"
    )
    assert api.check(ws.workspace).ok
    # ... and the new place is recorded: a change there is caught again.
    edited = TRAIN.replace("loss.backward()", "loss.mean().backward()")
    ws.write("src/train.py", '"""Training."""\n' + edited)
    assert kinds(api.check(ws.workspace)) == ["stale_ref"]


def test_changed_lines_get_a_diff_are_never_fixed_and_refresh_needs_accept(appended):
    ws = appended
    ws.write("src/train.py", TRAIN.replace("betas=(0.9, 0.95)", "betas=(0.9, 0.999)"))
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"]
    problem = report.problems[0]
    assert "src/train.py lines 5-8 changed" in problem.detail
    assert "--accept src/train.py:5-8" in problem.detail
    assert "-    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))" in problem.diff
    assert "+    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999))" in problem.diff
    shown = ws.cli("check")
    assert "+    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999))" in shown.stdout
    as_json = json.loads(ws.cli("check", "--json").stdout)
    assert as_json["problems"][0]["diff"] == problem.diff
    journal = ws.journal.read_bytes()
    fixed = ws.cli("check", "--fix")
    assert fixed.returncode == 1 and ws.journal.read_bytes() == journal  # not touched
    refused = ws.cli("refresh", "1")
    assert refused.returncode == 1 and "--accept src/train.py:5-8" in refused.stderr
    assert ws.cli("refresh", "1", "--accept", "src/nope.py:1").returncode == 1
    ok = ws.cli("refresh", "1", "--accept", "src/train.py:5-8")
    assert ok.returncode == 0, ok.stderr
    assert api.check(ws.workspace).ok


def test_lines_that_moved_and_changed_are_changed_with_their_likely_place(appended):
    ws = appended
    text = "# header\n# more\n" + TRAIN.replace("loss.backward()", "(loss / 4).backward()")
    ws.write("src/train.py", text)
    report = api.check(ws.workspace)
    assert kinds(report) == ["moved_ref", "stale_ref"]
    stale = next(p for p in report.problems if p.kind == "stale_ref")
    assert "probably lines 14-17 now" in stale.detail
    assert "+    (loss / 4).backward()" in stale.diff


def test_a_function_moved_to_another_file_is_found_by_content_without_git(appended):
    ws = appended
    head, _, step = TRAIN.partition("def train_step")
    ws.write("src/train.py", head)
    ws.write("src/loop.py", "import torch\n\n\ndef train_step" + step)
    report = api.check(ws.workspace)
    assert [(p.kind, p.moved_to) for p in report.problems] == [("moved_ref", "src/loop.py:5-8")]
    outcome = api.fix_refs(ws.workspace)
    assert [(f.old, f.new) for f in outcome.fixed] == [("src/train.py:12-15", "src/loop.py:5-8")]
    assert "`src/loop.py:5-8`" in ws.journal.read_text()
    assert api.check(ws.workspace).ok


def test_deleted_code_is_gone(appended):
    ws = appended
    (ws.root / "src/train.py").unlink()
    report = api.check(ws.workspace)
    assert kinds(report) == ["missing_ref", "missing_ref"]
    assert "nowhere else in the workspace" in report.problems[0].detail


def test_repeated_lines_without_telling_context_are_never_moved(ws):
    block = "    x = x + 1\n    y = y + 1\n"
    ws.write("src/loop.py", "def f(x, y):\n" + block + "    return x\n")
    api.append_entry(ws.workspace, make_entry(body="The update is `src/loop.py:2-3`.\n"))
    ws.write("src/loop.py", "def g(x, y):\n    z = 0\n" + block + "\n" + block + "    return y\n")
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"]
    assert "occur 2 times" in report.problems[0].detail


def test_references_recorded_before_anchors_still_check(appended):
    ws = appended
    path = ws.root / ".journal/refs.jsonl"
    item = json.loads(path.read_text().splitlines()[-1])
    path.write_text(json.dumps({"entry": item["entry"], "refs": item["refs"]}) + "\n")
    ws.write("src/train.py", "# one more line\n" + TRAIN)
    assert kinds(api.check(ws.workspace)) == ["moved_ref", "moved_ref"]
    ws.write("src/train.py", TRAIN.replace("lr=lr", "lr=lr * 2"))
    assert kinds(api.check(ws.workspace)) == ["stale_ref"]


def test_fix_keeps_every_other_byte_and_the_entry_ids(appended):
    ws = appended
    api.append_entry(
        ws.workspace,
        make_entry(
            title="Second",
            date="2026-11-22",
            body="Again `src/train.py:12-15`, and src/train.py:4.\n",
        ),
    )
    ws.write("src/train.py", "\n\n" + TRAIN)
    before = ws.journal.read_text()
    ids = [e.id for e in api.load(ws.workspace).entries]
    fixed = api.fix_refs(ws.workspace).fixed
    assert sorted(f.new for f in fixed) == [
        "src/train.py:14-17",
        "src/train.py:14-17",
        "src/train.py:6",
        "src/train.py:7-10",
    ]
    after = ws.journal.read_text()
    expected = (
        before.replace("src/train.py:5-8", "src/train.py:7-10")
        .replace("src/train.py:12-15", "src/train.py:14-17")
        .replace("src/train.py:4.", "src/train.py:6.")
    )
    assert after == expected
    assert [e.id for e in api.load(ws.workspace).entries] == ids
    assert api.check(ws.workspace).ok


def test_the_mcp_tool_fixes_moved_references(appended):
    ws = appended
    ws.write("src/train.py", "#\n" + TRAIN)
    ctx = make_context(ws.root)
    seen = JournalCheck().call(ctx, {})
    assert seen.is_error and "moved_ref" in seen.content and "src/train.py:6-9" in seen.content
    assert "src/train.py:5-8" in ws.journal.read_text()
    done = JournalCheck().call(ctx, {"fix": True})
    assert not done.is_error and "Fixed line" in done.content and "no problems" in done.content
    assert "src/train.py:6-9" in ws.journal.read_text()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_rename_to_another_kind_of_file_is_followed(ws):
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=ws.root,
            check=True,
            capture_output=True,
        )

    ws.write("src/train.py", TRAIN)
    git("init", "-q")
    git("add", "src/train.py")
    git("commit", "-qm", "train")
    api.append_entry(ws.workspace, make_entry(body="The step in `src/train.py:12-15`.\n"))
    line = json.loads((ws.root / ".journal/refs.jsonl").read_text().splitlines()[-1])
    assert line["anchors"]["src/train.py:12-15"]["commit"]
    # Renamed to another extension (the content search looks at files of the same kind only),
    # with a line added above.
    git("mv", "src/train.py", "src/train_loop.pyx")
    (ws.root / "src/train_loop.pyx").write_text("# cython: language_level=3\n" + TRAIN)
    report = api.check(ws.workspace)
    assert [(p.kind, p.moved_to) for p in report.problems] == [
        ("moved_ref", "src/train_loop.pyx:13-16")
    ]
    assert api.fix_refs(ws.workspace).fixed[0].new == "src/train_loop.pyx:13-16"
    assert api.check(ws.workspace).ok


def test_fix_waits_for_the_journal_lock(appended):
    import threading

    from journal_agent.journal.store import JournalStore

    ws = appended
    ws.write("src/train.py", "#\n" + TRAIN)
    before = ws.journal.read_bytes()
    store = JournalStore(ws.root)
    done = threading.Event()
    with store.lock():
        worker = threading.Thread(target=lambda: (api.fix_refs(ws.workspace), done.set()))
        worker.start()
        assert not done.wait(0.5)  # an append in progress: the fix waits for it
        assert ws.journal.read_bytes() == before
    worker.join(30)
    assert done.is_set() and "src/train.py:6-9" in ws.journal.read_text()


def test_kept_anchors_read_as_the_anchors_torn_and_foreign_lines_skipped(tmp_path):
    """What a long-lived process keeps (each entry's line, parsed when asked) says what
    ``anchors()`` says: the last valid line of an entry wins, a torn line or a line of another
    shape is skipped, an old hash-only line still gives its hash."""
    from journal_agent.journal.refs import Anchor, RefStore

    store = RefStore(tmp_path / "refs.jsonl")
    store.record("a", {"x.py:1": Anchor("h1", 1, ("one",))})
    store.record("b", {"y.py:2-3": Anchor("h2", 2, ("two", "three"), before=("zero",))})
    store.record("a", {"x.py:1": Anchor("h3", 1, ("uno",))})
    with store.path.open("a") as f:
        f.write('{"entry": "b", "anchors": 7}\n')  # not anchors: b's earlier line stands
        f.write('{"entry": "c", "refs": {"z.py:9": "h4"}}\n')  # before anchors existed
        f.write('["not", "an", "object"]\n{"entry": "d", "anch')  # a torn last line
    kept = store.anchors_on_disk()
    assert dict(kept) == store.anchors()
    assert sorted(kept) == ["a", "b", "c"] and len(kept) == 3
    assert kept["a"]["x.py:1"].text == ("uno",) and kept["c"]["z.py:9"].hash == "h4"
    assert kept.get("d") is None
