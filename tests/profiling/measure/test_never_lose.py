"""A measurement is never lost to what runs beside it: a FLOP formula that fails, a trace that
fails, a trace that aborts in C++. Each failure is provoked for real on the CPU."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from profiling.config import TrainingConfig  # noqa: E402
from profiling.measure.profiler import MemoryProfiler  # noqa: E402
from profiling.measure.run import RunOptions, measure_step  # noqa: E402
from profiling.trace._torch_compat import safe_flop_formulas  # noqa: E402

FACTORIES = textwrap.dedent(
    '''
    import torch
    from torch import nn


    def _traced():
        from torch._guards import active_fake_mode

        return active_fake_mode() is not None


    class Net(nn.Module):
        def __init__(self, device=None):
            super().__init__()
            self.lin = nn.Linear(16, 16, device=device)

        def forward(self, x):
            return self.lin(x).square().mean()


    def aborts_when_traced(batch=4, seq=None):
        """Runs for real; under the trace's fake tensors it asks autograd for a cuda tensor,
        which a CPU-only torch answers with a C++ abort (terminate), as a GPU machine's torch
        once did in the middle of a trace."""
        if _traced():
            x = torch.ones(batch, 16, device="cuda", requires_grad=True)
            return Net(), (x * 2,)
        return Net(), (torch.randn(batch, 16),)


    def raises_when_traced(batch=4, seq=None):
        if _traced():
            raise RuntimeError("only real tensors here")
        return Net(), (torch.randn(batch, 16),)
    '''
)


@pytest.fixture
def factories(tmp_path, monkeypatch):
    (tmp_path / "beside.py").write_text(FACTORIES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _measure(model: str) -> object:
    options = RunOptions(steps=2, warmup=1, timeout=120)
    return measure_step(TrainingConfig(model=model, batch=4, seq=8), options)


def test_a_trace_that_aborts_in_cpp_is_a_note_and_the_measurement_stays(factories) -> None:
    run = _measure("beside:aborts_when_traced")
    assert run.trace is None
    assert len(run.summary.steps) == 3 and run.summary.peak_bytes > 0  # measured, every step
    (note,) = [n for n in run.summary.notes if n.startswith("no trace beside")]
    assert "SIGABRT" in note and "C++" in note


def test_a_trace_that_fails_is_a_note_and_the_measurement_stays(factories) -> None:
    run = _measure("beside:raises_when_traced")
    assert run.trace is None and len(run.summary.steps) == 3
    (note,) = [n for n in run.summary.notes if n.startswith("no trace beside")]
    assert "only real tensors here" in note


def test_the_trace_beside_a_measurement_runs_in_a_child_and_agrees() -> None:
    # On the CPU every live tensor of the process is measured, those earlier tests in this
    # worker left alive too; the trace sees only the step's.
    probe = MemoryProfiler(device="cpu")
    held = probe.start().current
    probe.stop()
    run = _measure("tiny-gpt2")
    assert run.trace is not None, run.summary.notes
    assert run.trace.config.target == "cpu"
    peak = {r["what"]: r for r in run.comparison}["step peak"]
    assert peak["measured_bytes"] - held == peak["traced_bytes"]
    from profiling.measure.report import render_comparison

    assert "under fake tensors, target cpu" in render_comparison(run.comparison)


def test_a_failing_flop_formula_is_a_note_and_the_measurement_goes_on(monkeypatch) -> None:
    from torch.utils import flop_counter

    def broken(*args, **kwargs):
        raise AssertionError("mm_flop: no formula for these shapes")

    # torch's own registry answers with a failing formula for every matmul
    monkeypatch.setitem(flop_counter.flop_registry, torch.ops.aten.mm, broken)
    monkeypatch.setitem(flop_counter.flop_registry, torch.ops.aten.addmm, broken)
    run = _measure("tiny-llama")
    assert len(run.summary.steps) == 3
    notes = " ".join(run.notes)
    assert "FLOPs of mm not counted" in notes and "no formula for these shapes" in notes


# ----------------------------------------------------------------- grouped-query FLOPs


def _sdpa_flop_count_torch_2_11(query, key, value, *args, **kwargs):
    """torch 2.11's formula, as it shipped: it asserts unless key/value have the query's heads."""
    b, h, s_q, d_q = query.shape
    b2, h2, s_k, d2 = key.shape
    b3, h3, s3, _ = value.shape
    if not b == b2 == b3 or not h == h2 == h3 or not d_q == d2 or not s_k == s3:
        raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")
    return 4 * b * h * s_q * s_k * d_q


def test_grouped_query_attention_is_counted_with_its_heads_expanded() -> None:
    op = torch.ops.aten._scaled_dot_product_flash_attention
    q = torch.empty(2, 32, 128, 64, device="meta")
    k = v = torch.empty(2, 4, 128, 64, device="meta")  # 8 query heads per key/value head
    with pytest.raises(AssertionError, match="shapes are incompatible"):
        _sdpa_flop_count_torch_2_11(q, k, v)  # what ended a measurement on the H200
    failures: dict[str, str] = {}
    safe = safe_flop_formulas(failures, {op: _sdpa_flop_count_torch_2_11})[op]
    assert safe(q, k, v, out_val=None) == 4 * 2 * 32 * 128 * 128 * 64  # as 32 full heads
    assert failures == {}
    # and the count equals the installed torch's own formula where it handles the shapes
    from torch.utils.flop_counter import flop_registry

    assert safe(q, k, v, out_val=None) == flop_registry[op](q, k, v, out_val=None)


def test_a_formula_that_still_fails_counts_zero_and_says_why() -> None:
    op = torch.ops.aten.mm
    failures: dict[str, str] = {}

    def broken(*args, **kwargs):
        raise ValueError("bad shapes")

    safe = safe_flop_formulas(failures, {op: broken})[op]
    assert safe(torch.empty(2, 3), torch.empty(3, 4), out_val=None) == 0
    assert failures == {"mm": "ValueError: bad shapes"}
