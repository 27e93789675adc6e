"""`journal check` treats a measured record (a real CPU run of MemoryProfiler) like the others:
the numbers quoted beside its citation must be values of the record."""

from __future__ import annotations

import torch
from torch import nn

from journal_agent.journal import api
from journal_agent.paths import measurements_dir
from profiling import MemoryProfiler
from profiling.measure.report import fmt_time

from .conftest import make_entry


def _measured(root) -> tuple[str, MemoryProfiler]:
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(64, 256)
    prof = MemoryProfiler(device="cpu", warmup=1)
    prof.start()
    for step in range(4):
        with prof.phase("forward"):
            loss = model(x).square().mean()
        with prof.phase("backward"):
            loss.backward()
        with prof.phase("optimizer"):
            opt.step()
            opt.zero_grad()
        prof.record_step(step)
    return prof.save_record(measurements_dir(root)), prof


def test_numbers_quoted_from_a_measured_record_check_and_wrong_ones_do_not(ws):
    rid, prof = _measured(ws.root)
    s = prof.summary()
    peak_kb = f"{s.peak_bytes / 1e3:.1f} KB"
    step = fmt_time(s.step_time.median)  # e.g. "1.23 ms", as the report prints it
    good = f"On this CPU the step peaked at {peak_kb} and took {step} (median) [m:{rid}].\n"
    outcome = api.append_entry(ws.workspace, make_entry(body=good))
    assert outcome.problems == [], outcome.problems
    assert api.check(ws.workspace).ok
    wrong = f"{s.peak_bytes * 3 / 1e3:.1f} KB"
    bad = f"The step peaked at {wrong} [m:{rid}].\n"
    problems = api.append_entry(ws.workspace, make_entry(title="Other", body=bad)).problems
    assert [p.kind for p in problems] == ["bad_citation"]
    assert wrong in problems[0].detail
