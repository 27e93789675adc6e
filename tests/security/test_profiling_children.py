"""Findings 1 and 3 of the third review: MemoryProfile ran `python -m journal_agent profile …`
outside the sandbox with the parent's environment and the workspace first on sys.path (a
planted `typer.py` was imported, unasked, in every mode); MemoryTrace imported a factory
in-process, outside the sandbox, in bypassPermissions.

Now both children run as Bash would run them: in the sandbox, by the mode's rules, with the
allow-listed environment, as `python -I`.
"""

from __future__ import annotations

import os

import pytest

from journal_agent.tools import make_context
from journal_agent.tools.memory_profile import MemoryProfile
from journal_agent.tools.memory_trace import MemoryTrace
from tests.trust_helpers import approve

PLANTED = ("typer.py", "rich.py", "pydantic.py", "profiling.py")

FACTORY = """
import os
import torch
from torch import nn


def make(batch=1, seq=8):
    try:
        open({outside!r}, "w").write("factory ran outside the sandbox")
    except OSError:
        pass
    try:
        open("env-seen.txt", "w").write(repr(os.environ.get("AWS_SECRET_ACCESS_KEY")))
    except OSError:
        pass
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    return model, (torch.randn(batch, 8),)
"""


def _plant(lab) -> None:
    for name in PLANTED:
        (lab.ws / name).write_text(
            f"open({str(lab.outside / ('imported-' + name))!r}, 'w').write('x')\n"
        )
    (lab.ws / "evil_models.py").write_text(FACTORY.format(outside=str(lab.outside / "pwned")))


@pytest.fixture(autouse=True)
def _secret_env(monkeypatch, lab):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-PARENT-SECRET")
    monkeypatch.setenv("HOME", str(lab.home))


def test_finding_01_profile_child_never_imports_workspace_modules(lab):
    _plant(lab)
    ctx = make_context(lab.ws)  # default mode, nobody to ask
    res = MemoryProfile().call(ctx, {"model": "tiny-gpt2", "seq": 16, "steps": 1,
                                     "warmup": 0, "timeout": 120})  # fmt: skip
    assert not res.is_error, res.content
    assert "record:" in res.content
    record_id = res.content.split("record: ")[1].split()[0]
    assert (lab.ws / ".journal/measurements" / f"{record_id}.json").exists()
    lab.assert_nothing_outside()


@pytest.mark.parametrize("mode", ["bypassPermissions", "acceptEdits"])
def test_finding_01_profile_factory_runs_in_the_sandbox(lab, mode):
    _plant(lab)
    ctx = make_context(lab.ws, mode=mode, allow=["Bash(journal-agent profile:*)"])
    res = MemoryProfile().call(ctx, {"model": "evil_models:make", "steps": 1, "warmup": 0,
                                     "timeout": 120})  # fmt: skip
    assert not res.is_error, res.content
    lab.assert_nothing_outside()
    assert (lab.ws / "env-seen.txt").read_text() == "None"  # the parent's secret: not there


def test_finding_01_profile_factory_in_default_mode_is_asked_for(lab):
    _plant(lab)
    res = MemoryProfile().call(make_context(lab.ws), {"model": "evil_models:make", "steps": 1})
    assert res.is_error and "Permission denied" in res.content
    assert not (lab.ws / "env-seen.txt").exists()
    lab.assert_nothing_outside()


def test_finding_03_trace_factory_runs_in_the_sandbox_even_in_bypass_permissions(lab):
    _plant(lab)
    ctx = make_context(lab.ws, mode="bypassPermissions")
    res = MemoryTrace().call(ctx, {"model": "evil_models:make", "batch": 2})
    assert not res.is_error, res.content
    assert "record:" in res.content
    lab.assert_nothing_outside()
    assert (lab.ws / "env-seen.txt").read_text() == "None"
    records = list((lab.ws / ".journal/measurements").glob("trace-*.json"))
    assert records, os.listdir(lab.ws)


def test_finding_03_trace_factory_in_plan_mode_writes_nothing(lab):
    _plant(lab)
    ctx = make_context(lab.ws, mode="plan", allow=["Bash(journal-agent trace:*)"])
    res = MemoryTrace().call(ctx, {"model": "evil_models:make", "batch": 2})
    assert not res.is_error, res.content  # it traced, in a read-only view
    assert not (lab.ws / "env-seen.txt").exists()
    lab.assert_nothing_outside()


def test_finding_10_a_profile_beyond_the_memory_bound_is_killed_and_said_in_one_sentence(lab):
    from journal_agent.tools.sandbox.config import SandboxLimits
    from journal_agent.tools.sandbox.limits import prepare

    tree = prepare(SandboxLimits())
    tree.close()
    if not tree.memory_bounded:
        pytest.skip("no memory cgroup here: memory is bounded per process only")
    (lab.ws / ".claude").mkdir()
    (lab.ws / ".claude/settings.json").write_text('{"sandbox": {"limits": {"memory": "200M"}}}')
    approve(lab.ws)
    args = {"model": "gpt2-small", "batch": 8, "seq": 512, "steps": 1, "warmup": 0}
    res = MemoryProfile().call(make_context(lab.ws), args)
    assert res.is_error
    assert "sandbox.limits.memory" in res.content and "Traceback" not in res.content
