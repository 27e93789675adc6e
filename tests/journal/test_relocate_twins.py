"""Relocation never picks a twin (issue #33): a place holding the cited lines is taken only when
the definitions around it are the ones recorded (or, for a renamed one, its context came along);
changed lines are suggested for ``refresh --accept`` only where what was cited is now."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from journal_agent.journal import api

from .conftest import make_entry

CLIENT = Path(httpx2.__file__).with_name("_client.py").read_text(encoding="utf-8")
# In Client.send; AsyncClient.send holds the same lines (httpx's sync/async pair).
CITED = (
    "        if self._state == ClientState.CLOSED:\n"
    '            raise RuntimeError("Cannot send a request, as the client has been closed.")\n'
    "\n"
    "        self._state = ClientState.OPENED\n"
)


def kinds(report) -> list[str]:
    return sorted(p.kind for p in report.problems)


def line_of(text: str, needle: str, nth: int = 0) -> int:
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1


@pytest.fixture
def client(ws):
    assert CLIENT.count(CITED) == 2, "httpx2 no longer has the twin this test cites"
    start = line_of(CLIENT, CITED)  # the first: Client.send
    assert start < line_of(CLIENT, "class AsyncClient")
    ws.write("pkg/_client.py", CLIENT)
    ref = f"pkg/_client.py:{start}-{start + 3}"
    body = f"A closed client refuses to send: `{ref}`.\n"
    outcome = api.append_entry(ws.workspace, make_entry(body=body))
    assert outcome.appended and outcome.problems == [], outcome.problems
    anchor = json.loads((ws.root / ".journal/refs.jsonl").read_text().splitlines()[-1])
    recorded = anchor["anchors"][ref]
    assert recorded["twins"] == 1 and recorded["scope"][0] == "class Client(BaseClient):"
    return ws, ref, start


def test_an_edit_of_the_cited_copy_is_flagged_never_moved_into_its_twin(client):
    ws, ref, _ = client
    edited = CLIENT.replace(CITED, CITED.replace("client has been closed", "client is closed"), 1)
    ws.write("pkg/_client.py", edited)
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"], report.problems
    assert report.problems[0].moved_to is None
    assert f"--accept {ref}" in report.problems[0].detail  # the cited lines are still here
    journal = ws.journal.read_bytes()
    assert api.fix_refs(ws.workspace).fixed == []
    assert ws.journal.read_bytes() == journal


def test_an_edit_of_the_twin_leaves_the_cited_copy_fresh(client):
    ws, _, _ = client
    twin = CLIENT.index(CITED, CLIENT.index("class AsyncClient"))
    rest = CLIENT[twin + len(CITED) :]
    edited = CLIENT[:twin] + CITED.replace("OPENED", "OPENED  # async") + rest
    ws.write("pkg/_client.py", edited)
    assert api.check(ws.workspace).ok


def test_the_cited_copy_moved_and_its_twin_did_not_is_followed(client):
    ws, _, start = client
    # Three lines above Client.send only: the twin (in AsyncClient) shifts by as much.
    at = CLIENT.index("    def send(")
    ws.write("pkg/_client.py", CLIENT[:at] + "    # a\n    # b\n    # c\n" + CLIENT[at:])
    report = api.check(ws.workspace)
    assert [(p.kind, p.moved_to) for p in report.problems] == [
        ("moved_ref", f"pkg/_client.py:{start + 3}-{start + 6}")
    ]


def test_the_async_copy_edited_after_the_class_moved_is_not_taken_for_the_sync_one(ws):
    """The same with the async client cited: the sync client's copy stays untouched."""
    start = line_of(CLIENT, CITED, nth=1)
    ws.write("pkg/_client.py", CLIENT)
    ref = f"pkg/_client.py:{start}-{start + 3}"
    api.append_entry(ws.workspace, make_entry(body=f"Async too: `{ref}`.\n"))
    twin = CLIENT.index(CITED, CLIENT.index("class AsyncClient"))
    edited = CLIENT[:twin] + CITED.replace("OPENED", "OPEN") + CLIENT[twin + len(CITED) :]
    ws.write("pkg/_client.py", "# header\n" + edited)
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"]
    assert "probably" in report.problems[0].detail
    assert f"pkg/_client.py:{start + 1}-{start + 4}" in report.problems[0].detail


LOADERS = (
    "import json\n"
    "\n"
    "\n"
    "def load_config(path):\n"
    "    with open(path) as f:\n"
    "        data = json.load(f)\n"
    "    return validate(data)\n"
    "\n"
    "\n"
    "def load_manifest(path):\n"
    "    with open(path) as f:\n"
    "        data = json.load(f)\n"
    "    return validate(data)\n"
)


def test_a_deleted_function_whose_twin_took_its_line_numbers_is_not_fresh(ws):
    ws.write("src/loaders.py", LOADERS)
    api.append_entry(ws.workspace, make_entry(body="Configs are read in `src/loaders.py:5-7`.\n"))
    # load_config deleted: load_manifest's identical lines now sit at lines 5-7.
    ws.write("src/loaders.py", LOADERS.replace(LOADERS[LOADERS.index("def load_config") :], "")
             + LOADERS[LOADERS.index("def load_manifest") :])  # fmt: skip
    assert ws.root.joinpath("src/loaders.py").read_text().splitlines()[4].strip() == (
        "with open(path) as f:"
    )
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"], report.problems
    detail = report.problems[0].detail
    assert "`load_config`, whose lines the entry cites, is no longer in src/loaders.py" in detail
    assert "`load_manifest`" in detail and "--accept" not in detail
    refused = ws.cli("refresh", "1", "--accept", "src/loaders.py:5-7")
    assert refused.returncode == 1 and "no longer in the code it cited" in refused.stderr


def test_a_renamed_function_without_a_twin_keeps_its_reference(ws):
    single = LOADERS[: LOADERS.index("\n\ndef load_manifest")] + "\n"
    ws.write("src/loaders.py", single)
    api.append_entry(ws.workspace, make_entry(body="Configs are read in `src/loaders.py:5-7`.\n"))
    ws.write("src/loaders.py", single.replace("def load_config", "def read_config"))
    assert api.check(ws.workspace).ok
    ws.write("src/loaders.py", "\n" + single.replace("def load_config", "def read_config"))
    report = api.check(ws.workspace)
    assert [(p.kind, p.moved_to) for p in report.problems] == [("moved_ref", "src/loaders.py:6-8")]


TRAIN = (
    "import torch\n"
    "\n"
    "\n"
    "def build_optimizer(model, lr):\n"
    "    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]\n"
    "    return torch.optim.AdamW(decay, lr=lr, betas=(0.9, 0.95))\n"
    "\n"
    "\n"
    "def train_step(model, batch, optimizer):\n"
    "    loss = model(**batch).loss\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    optimizer.zero_grad(set_to_none=True)\n"
    "    return loss.item()\n"
    "\n"
    "\n"
    "def evaluate(model, batches):\n"
    "    model.eval()\n"
    "    with torch.no_grad():\n"
    "        losses = [model(**b).loss.item() for b in batches]\n"
    "    model.train()\n"
    "    return sum(losses) / len(losses)\n"
)
STEP = TRAIN[TRAIN.index("def train_step") : TRAIN.index("def evaluate")]  # and 2 blank lines
LOOP_HEAD = "import torch\n\n\ndef log(x):\n    print(x)\n\n\n"  # new neighbours
WITHOUT_STEP = "from src.loop import train_step\n" + TRAIN.replace(STEP, "")


@pytest.fixture
def step_cited(ws):
    ws.write("src/train.py", TRAIN)
    body = "The whole step: `src/train.py:9-14`; the update alone: `src/train.py:12`.\n"
    assert api.append_entry(ws.workspace, make_entry(body=body)).appended
    return ws


def test_a_function_cut_and_pasted_into_another_file_is_found_there(step_cited):
    ws = step_cited
    ws.write("src/train.py", WITHOUT_STEP)
    ws.write("src/loop.py", LOOP_HEAD + STEP.rstrip() + "\n")
    report = api.check(ws.workspace)
    assert sorted((p.kind, p.moved_to) for p in report.problems) == [
        ("moved_ref", "src/loop.py:11"),
        ("moved_ref", "src/loop.py:8-13"),
    ]
    api.fix_refs(ws.workspace)
    assert api.check(ws.workspace).ok


def test_a_function_cut_pasted_and_edited_is_reported_where_it_went(step_cited):
    ws = step_cited
    ws.write("src/train.py", WITHOUT_STEP)
    edited = STEP.rstrip().replace("optimizer.step()", "scaler.step(optimizer)") + "\n"
    ws.write("src/loop.py", LOOP_HEAD + edited)
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref", "stale_ref"], report.problems
    for problem in report.problems:
        assert "`train_step` is now in src/loop.py" in problem.detail
        assert "evaluate" not in problem.detail and "import" not in problem.detail
        assert "--accept" not in problem.detail
    whole = next(p for p in report.problems if "src/train.py:9-14" in p.detail)
    assert "src/loop.py:8-13" in whole.detail
    assert "+    scaler.step(optimizer)" in whole.diff
    one = next(p for p in report.problems if "src/train.py:12 " in p.detail)
    assert "probably src/loop.py:11 now" in one.detail
    assert "change its reference src/train.py:12 to src/loop.py:11," in one.detail


MOD = "def scale(x):\n    y = x * 2\n    z = y + 1\n    return z\n"


def test_lines_that_moved_and_changed_are_never_suggested_at_their_old_numbers(ws):
    ws.write("m.py", MOD)
    api.append_entry(ws.workspace, make_entry(body="Scaling is `m.py:1-4`.\n"))
    ws.write("m.py", "import os\n\n" + MOD.replace("y + 1", "y + 2"))
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"]
    detail = report.problems[0].detail
    assert "--accept m.py:1-4" not in detail
    assert "change its reference m.py:1-4 to m.py:3-6" in detail
    assert "+    z = y + 2" in report.problems[0].diff
    refs = (ws.root / ".journal/refs.jsonl").read_bytes()
    refused = ws.cli("refresh", "1", "--accept", "m.py:1-4")
    assert refused.returncode == 1 and "probably at m.py:3-6" in refused.stderr
    assert (ws.root / ".journal/refs.jsonl").read_bytes() == refs
    # As the check says: the reference changed to where the code is, then refreshed.
    ws.journal.write_text(ws.journal.read_text().replace("`m.py:1-4`", "`m.py:3-6`"))
    done = ws.cli("refresh", "1")
    assert done.returncode == 0, done.stderr
    assert api.check(ws.workspace).ok


SCRIPT = (
    "import torch\n"
    "\n"
    "\n"
    "def train(model, data, steps):\n"
    "    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)\n"
    "    for step, batch in zip(range(steps), data):\n"
    "        model(batch).loss.backward()\n"
    "        optimizer.step()\n"
)


def test_a_training_script_s_changed_line_is_suggested_where_the_optimizer_is(ws):
    ws.write("train.py", SCRIPT)
    api.append_entry(ws.workspace, make_entry(body="AdamW with decay: `train.py:5`.\n"))
    ws.write("train.py", "import os\nimport math\n" + SCRIPT.replace("lr=3e-4", "lr=1e-4"))
    report = api.check(ws.workspace)
    assert kinds(report) == ["stale_ref"]
    assert "change its reference train.py:5 to train.py:7" in report.problems[0].detail
    refused = ws.cli("refresh", "1", "--accept", "train.py:5")
    assert refused.returncode == 1 and "probably at train.py:7" in refused.stderr


def test_refresh_names_a_reference_it_could_not_record(ws):
    ws.write("src/a.py", "def a():\n    return 1\n")
    ws.write("src/b.py", "def b():\n    return 2\n")
    api.append_entry(ws.workspace, make_entry(body="`src/a.py:1-2` and `src/b.py:1-2`.\n"))
    (ws.root / "src/b.py").unlink()
    done = ws.cli("refresh", "1")
    assert done.returncode == 0, done.stderr
    assert "1 reference(s)" in done.stdout and "src/a.py:1-2" in done.stdout
    assert "not recorded: src/b.py:1-2: no such file" in done.stderr
    as_json = json.loads(ws.cli("refresh", "1", "--json").stdout)
    assert as_json["skipped"] == {"src/b.py:1-2": "src/b.py:1-2: no such file"}
