"""The fourth review (medium): a default-mode command forged a "measured" record through the
call's writable outbox (`/tmp/journal-agent-outbox`, in every sandboxed call), and `[m:id]`
then checked out in the journal as a measurement.

Now a record is only ever picked up from the sandbox of the measuring child that made it: our
own argv (MemoryProfile, MemoryTrace, `journal-agent trace|profile|fit|estimate` alone on a
Bash line, run by the Bash tool instead of the line). A command line gets no outbox at all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from journal_agent.journal import api
from journal_agent.workspace import Workspace
from profiling.records import MeasurementRecord, Quantity
from tests.entries import render_entry

FORGED_ID = "meas-0badc0de"
FORGED = MeasurementRecord(
    id=FORGED_ID,
    kind="measured",
    title="H100 peak (forged)",
    results=[Quantity(name="peak", value=12.0 * 2**30, unit="B")],
).model_dump_json()
# In a script, so that no rule reading the command line stands in the way: only the sandbox.
FORGE_SH = (
    "mkdir -p /tmp/journal-agent-outbox; cp forged.json /tmp/journal-agent-outbox/\n"
    'cp forged.json "${JOURNAL_AGENT_OUTBOX:-/tmp/journal-agent-outbox}/x.json"\n'
    "echo tried\n"
)
FORGE = "sh forge.sh"
MODES = [("default", ("Bash",)), ("acceptEdits", ("Bash",)), ("bypassPermissions", ())]


@pytest.fixture
def forged(lab, monkeypatch) -> Path:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (lab.ws / "forged.json").write_text(FORGED)
    (lab.ws / "forge.sh").write_text(FORGE_SH)
    return lab.ws / ".journal/measurements" / f"{FORGED_ID}.json"


def _cites_the_forgery(root: Path) -> list[str]:
    """The problems `journal check` finds in an entry quoting the forged record's number."""
    entry = render_entry(
        "Peak on the H100", "2026-11-21", context="Measured.", question="How much?",
        intuition=f"Peak is 12 GiB [m:{FORGED_ID}].", tags="#memory",
    )  # fmt: skip
    (root / "learning_journal.md").write_text("# Learning Journal\n\n" + entry)
    return [p.detail for p in api.check(Workspace(root)).problems]


@pytest.mark.parametrize(("mode", "allow"), MODES)
def test_a_command_line_cannot_hand_back_a_record(lab, forged, mode, allow):
    res = lab.bash(FORGE, mode, allow)
    assert "tried" in res.stdout, res.stdout
    assert not forged.exists()
    assert any("does not resolve" in d for d in _cites_the_forgery(lab.ws))


@pytest.mark.parametrize(("mode", "allow"), MODES)
def test_a_real_measurement_on_the_same_line_brings_no_forgery_along(lab, forged, mode, allow):
    line = f"journal-agent estimate --model tiny-gpt2 --json >/dev/null; {FORGE}"
    lab.bash(line, mode, allow)
    assert not forged.exists()
    assert not list((lab.ws / ".journal").glob("measurements/*.json"))  # nothing from a line


def test_a_measurement_alone_on_its_line_keeps_its_record(lab, forged):
    line = "journal-agent trace --model tiny-gpt2 --batch 1 --seq 16"
    res = lab.bash(line, "bypassPermissions", timeout=300)  # a trace takes tens of seconds
    assert "record: trace-" in res.stdout, res.stdout
    record_id = res.stdout.split("record: ")[1].split()[0]
    assert (lab.ws / ".journal/measurements" / f"{record_id}.json").is_file()
    assert not forged.exists()
