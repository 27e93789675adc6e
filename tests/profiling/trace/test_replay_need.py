"""The replay's verdict near full (D61): whether the caching allocator runs out is not monotone in
the GPU's size — a release forced early (``release_cached_blocks`` before a retried
``cudaMalloc``, c10/cuda/CUDACachingAllocator.cpp) hands back segments a later request would
have been carved from — so the least memory a step needs is the least from which every larger
capacity runs, scanned down from the reserve of a GPU that never runs out, the GPU's own size
replayed exactly; a bisection could land on a lucky capacity with larger ones running out.
A trace with a counter past allocated gives one verdict, by what nvidia-smi would show."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from profiling.trace.allocations import _replay, need, need_step, runs

if TYPE_CHECKING:
    from profiling.trace.step import TraceResult

MiB = 2**20

# 12 MiB freed; 40 and 60 MiB; the 40 freed; 60, 30 and 16 MiB more. On a GPU that never runs
# out: 12 + 40 + 60 + 60 + 16 = 188 MiB reserved, the 30 MiB carved from the cached 40 MiB block.
# With 172-175 MiB the second 60 MiB fits as it did, so the 30 MiB still lands in the cached 40
# MiB segment and pins it: the 16 MiB finds only the 12 MiB segment to hand back, out of memory.
# With 166-171 MiB the second 60 MiB already forces the release of both cached segments, the 30
# MiB takes a segment of its own, and 60 + 60 + 30 + 16 = 166 MiB run.
EVENTS: list[tuple[int, int | None]] = [
    (1, 12 * MiB), (1, None), (2, 40 * MiB), (3, 60 * MiB), (2, None), (4, 60 * MiB),
    (5, 30 * MiB), (6, 16 * MiB),
]  # fmt: skip


def _runs(capacity_mib: int) -> bool:
    return runs(EVENTS, [], {}, False, capacity_mib * MiB)


def test_the_replay_is_not_monotone_in_the_gpus_size() -> None:
    roomy = _replay(EVENTS, [], {}, False)
    assert (roomy.peak_allocated, roomy.peak_reserved) == (166 * MiB, 188 * MiB)
    assert all(_runs(c) for c in range(166, 172))
    assert not any(_runs(c) for c in range(172, 176))
    assert all(_runs(c) for c in range(176, 189))


def test_the_need_is_the_least_capacity_from_which_every_larger_one_runs() -> None:
    # A bisection between 166 and 188 MiB tried 177 MiB (runs), then 171.5 (runs) and answered
    # 168.75 MiB: a GPU leaving the allocator 173 MiB was called "fits" and runs out.
    least = need(EVENTS, [], {}, False, 166 * MiB, 188 * MiB)
    assert 176 * MiB <= least <= 176 * MiB + need_step(166 * MiB, 188 * MiB)
    assert all(_runs(c) for c in range(least // MiB, 189))
    # the GPU judged against is replayed itself: 173 MiB runs out, so the need is above it
    assert need(EVENTS, [], {}, False, 166 * MiB, 188 * MiB, budget=173 * MiB) > 173 * MiB


def test_a_gpu_inside_a_window_that_runs_is_replayed_exactly() -> None:
    # 170 MiB runs (the early release); the grid above it does not all run, so the scan stops
    # above 175 MiB: the need is never below a capacity that runs out
    assert _runs(170)
    assert need(EVENTS, [], {}, False, 166 * MiB, 188 * MiB, budget=170 * MiB) >= 176 * MiB


@pytest.fixture(scope="module")
def small_gpu_trace() -> TraceResult:
    pytest.importorskip("torch")
    from profiling.config import TrainingConfig
    from profiling.trace.step import trace_step

    # tiny-llama's allocated peak (tens of MB) is under 90 % of 0.6 GB, but nvidia-smi counts the
    # CUDA context's 500 MiB beside the reserve: it does not fit the 0.57 GB usable
    cfg = TrainingConfig.parse(style="field", model="tiny-llama", batch=2, seq=128,
                               counter="nvml", target="cuda", gpu_mem=0.6)  # fmt: skip
    return trace_step(cfg)


def test_a_replayed_trace_gives_one_verdict_by_nvidia_smi(small_gpu_trace: TraceResult) -> None:
    from profiling.estimate.render import HEADROOM
    from profiling.trace.report import render_trace_text, trace_verdict

    result = small_gpu_trace
    assert result.peak_bytes < HEADROOM * 0.6e9  # by the allocated peak it would be ✅
    verdict = trace_verdict(result, 0.6)
    assert verdict["fits"] is False and verdict["status"] == "❌"
    assert verdict["verdict"].startswith("❌ nvidia-smi would show")
    text = render_trace_text(result) + "\n" + verdict["verdict"]
    assert text.count("nvidia-smi would show") == 1 and "✅" not in text
    assert result.counters is not None
    assert verdict["fits"] == (result.counters.must_fit() <= 0.95 * 0.6e9)


def test_an_allocated_trace_keeps_the_allocated_verdict(small_gpu_trace: TraceResult) -> None:
    from profiling.trace.report import trace_verdict

    result = small_gpu_trace.model_copy(
        update={"config": small_gpu_trace.config.model_copy(update={"counter": "allocated"})}
    )
    verdict = trace_verdict(result, 0.6)
    assert verdict["status"] == "✅" and verdict["verdict"].startswith("✅ Fits")


def test_the_records_page_shows_the_traces_one_verdict(small_gpu_trace: TraceResult) -> None:
    from journal_agent.view.records import headline
    from profiling.trace.report import trace_record

    said = headline(trace_record(small_gpu_trace, 0.6))
    assert said is not None and said["status"] == "❌"
    assert said["verdict"].startswith("❌ nvidia-smi would show")
