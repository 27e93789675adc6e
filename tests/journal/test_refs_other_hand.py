"""``.journal/refs.jsonl`` keeps the anchors of every cited code line; a forged anchor makes a
reference to code that changed look fresh. It is written by our code only (the sandbox keeps
``.journal/`` read-only), so, as for the journal and the ledger (journal_agent/foreign_changes),
its SHA-256 is kept after each append and another hand's change is reported once, at the next
``journal check``, after a scan for secrets."""

from __future__ import annotations

import json

from journal_agent.foreign_changes import take_notes
from journal_agent.journal import api

from .conftest import make_entry

TRAIN = (
    "import torch\n\n\ndef build(model):\n"
    "    opt = torch.optim.AdamW(model.parameters())\n    return opt\n"
)
BODY = "The optimizer is built in `src/train.py:4-6`.\n"
KEY = "sk-ant-api03-" + "Zx9" * 30 + "AA"


def test_an_anchor_forged_by_another_hand_is_said_once(ws):
    ws.write("src/train.py", TRAIN)
    take_notes()
    outcome = api.append_entry(ws.workspace, make_entry(body=BODY))
    assert outcome.appended, outcome.problems
    refs = ws.root / ".journal/refs.jsonl"
    assert refs.is_file()
    assert api.check(ws.workspace).ok
    assert take_notes() == []  # our own append: nothing to report
    # A second entry of ours: still nothing (the stamp follows each append).
    outcome = api.append_entry(ws.workspace, make_entry(title="AdamW keeps two moments", body=BODY))
    assert outcome.appended, outcome.problems
    api.check(ws.workspace)
    assert take_notes() == []
    # Another hand appends a line for the first entry (a secret in it, too).
    first = json.loads(refs.read_text().splitlines()[0])
    forged = dict(first, note=KEY)
    with refs.open("a") as f:
        f.write(json.dumps(forged) + "\n")
    api.check(ws.workspace)
    notes = take_notes()
    assert len(notes) == 1, notes
    assert notes[0].startswith(
        "note: .journal/refs.jsonl was changed outside journal-agent since it last wrote it"
    )
    assert "looks like an Anthropic" in notes[0] and KEY not in notes[0]
    api.check(ws.workspace)
    assert take_notes() == []  # said once


def test_the_cli_says_it_on_stderr(ws):
    ws.write("src/train.py", TRAIN)
    assert api.append_entry(ws.workspace, make_entry(body=BODY)).appended
    take_notes()
    refs = ws.root / ".journal/refs.jsonl"
    refs.write_text(refs.read_text().replace("src/train.py", "src/other.py"))
    done = ws.cli("check")
    assert ".journal/refs.jsonl was changed outside journal-agent" in done.stderr
