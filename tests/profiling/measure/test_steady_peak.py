"""A measured run's headline is the user's steady step, and a run reads what it reads whatever
ran before it in the process.

- Warm-up step 0 runs torch's FlopCounterMode and makes the optimizer's state: on tiny-gpt2
  fully checkpointed its optimizer phase peaked 266 KB above every later step (audit6: 4.0 MB
  against 3.5 MB on a GPT-NeoX toy), and that was the headline. It is reported beside it.
- A fully checkpointed model was a reference cycle (``block.forward`` a partial holding the
  block), so each earlier run's model stayed alive until the cyclic collector ran, and the next
  run's start scan counted it: +400 KB a run on tiny-gpt2.

Only differences within this worker are compared: on the CPU every live tensor of the process
is measured, other tests' too (pytest-xdist), and those are the same in every run here."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("torch")

from profiling.config import TrainingConfig
from profiling.measure.report import render_summary, summary_json
from profiling.measure.run import RunOptions, measure_step
from profiling.measure.summary import ProfileSummary


def _summary(model: str, checkpointing: str, steps: int = 1) -> ProfileSummary:
    config = TrainingConfig(model=model, batch=2, seq=32, checkpointing=checkpointing)
    options = RunOptions(steps=steps, warmup=1, device="cpu", compare_trace=False)
    return measure_step(config, options).summary


def test_the_headline_is_the_steady_step_and_the_warm_up_peak_is_beside_it() -> None:
    gc.collect()  # other tests' garbage goes now, not in the middle of this run
    s = _summary("tiny-gpt2", "full", steps=2)
    steady = [st for st in s.steps if not st.warmup]
    assert [st.step for st in steady] == [1, 2]
    assert s.peak_bytes == max(st.peak_bytes for st in steady)
    assert s.peak_step in (1, 2) and s.peak_phase == "optimizer"
    warm = s.steps[0].peak_bytes
    assert warm > s.peak_bytes  # what the headline was: step 0's optimizer, the counter's run
    assert (s.warmup_peak_bytes, s.warmup_peak_step, s.warmup_peak_phase) == (warm, 0, "optimizer")
    assert "Warm-up peak:" in render_summary(s)
    json = summary_json(s, None)
    assert json["peak_bytes"] == s.peak_bytes
    assert json["warmup_peak"] == {"bytes": warm, "step": 0, "phase": "optimizer"}


def test_a_warm_up_peak_at_or_below_the_headline_is_not_reported() -> None:
    from profiling.measure.profiler import MemoryProfiler

    torch = pytest.importorskip("torch")
    prof = MemoryProfiler(device="cpu", warmup=1)
    prof.start()
    held = []
    for step in range(3):
        with prof.phase("forward"):
            held.append(torch.zeros(1000 * (step + 1)))  # each step above the one before
        prof.record_step(step)
    s = prof.summary()
    assert s.peak_step == 2 and s.warmup_peak_bytes is None
    assert "Warm-up peak" not in render_summary(s) and summary_json(s, None)["warmup_peak"] is None


@pytest.mark.parametrize(
    ("model", "checkpointing"),
    [("tiny-gpt2", "full"), ("tiny-llama", "full"), ("tiny-gpt2", "none")],
)
def test_runs_in_one_process_read_the_same(model: str, checkpointing: str) -> None:
    # The first run in a process imports and caches lazily (an exception caught on the way
    # keeps its frames, the model among their locals, until a collection): once, not per run
    _summary(model, checkpointing)
    gc.collect()
    gc.disable()  # what reference counting frees is freed; no collector run hides a cycle
    try:
        runs = [_summary(model, checkpointing) for _ in range(3)]
    finally:
        gc.enable()
    assert len({(s.peak_bytes, s.peak_step, s.peak_phase) for s in runs}) == 1, [
        (s.peak_bytes, s.steps[0].peak_bytes) for s in runs
    ]
    assert len({tuple(st.peak_bytes for st in s.steps) for s in runs}) == 1


def test_a_checkpointed_block_holds_its_module_weakly_unless_compiled_in_place() -> None:
    import weakref

    from torch import nn

    from profiling.trace.block_checkpoint import checkpointed_forward

    block = nn.Linear(2, 2)
    block.forward = checkpointed_forward(block)  # type: ignore[method-assign]
    gone = weakref.ref(block)
    del block
    assert gone() is None  # freed by reference counting: no cycle through its forward
    compiled = nn.Linear(2, 2)
    compiled.compile()  # Dynamo traces self.forward: the partial it has always traced
    assert isinstance(checkpointed_forward(compiled), __import__("functools").partial)
