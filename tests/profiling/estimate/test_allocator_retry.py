"""The caching allocator on a GPU of finite memory: before it raises out of memory it hands every
cached segment with no live block back to CUDA and retries (c10/cuda/CUDACachingAllocator.cpp,
``DeviceCachingAllocator::malloc``: ``release_cached_blocks`` then ``alloc_block`` again), so a
step runs on a GPU smaller than the reserve it builds on one that never runs out; a segment that
still holds a live block is never handed back. With expandable segments the whole pages of the
free blocks are unmapped and later mapped again at the lowest hole that holds a request."""

from __future__ import annotations

import pytest

from profiling.estimate.allocator import CachingAllocator, OutOfMemory
from profiling.trace.allocations import NEED_TOLERANCE, need, replayed

MiB = 2**20


def test_cached_segments_are_handed_back_before_out_of_memory() -> None:
    roomy = CachingAllocator()
    capped = CachingAllocator(capacity=50 * MiB)
    for a in (roomy, capped):
        a.malloc("a", 30 * MiB)  # a 30 MiB segment of its own
        a.free("a")  # cached, no live block in it
        a.malloc("b", 40 * MiB)  # fits no cached block: a new 40 MiB segment
    assert roomy.peak_reserved == 70 * MiB and roomy.retries == 0
    assert capped.reserved == 40 * MiB and capped.peak_reserved == 40 * MiB
    assert capped.retries == 1  # torch.cuda.memory_stats()'s num_alloc_retries
    with pytest.raises(OutOfMemory):  # less than the request itself: no retry helps
        CachingAllocator(capacity=39 * MiB).malloc("b", 40 * MiB)


def test_a_segment_holding_a_live_block_is_never_handed_back() -> None:
    def run(capacity: int) -> CachingAllocator:
        a = CachingAllocator(capacity=capacity)
        a.malloc("a", 2 * MiB)  # 1-10 MiB: carved from a 20 MiB segment
        a.malloc("c", 2 * MiB)  # the same segment
        a.free("a")  # the segment is partly free: c still lives in it
        a.malloc("b", 40 * MiB)
        return a

    with pytest.raises(OutOfMemory) as out:
        run(59 * MiB)
    assert out.value.reserved == 20 * MiB and out.value.size == 40 * MiB
    assert run(60 * MiB).reserved == 60 * MiB


def test_the_small_pool_and_other_streams_are_handed_back_too() -> None:
    a = CachingAllocator(capacity=30 * MiB)
    a.malloc("s", 4096)  # a 2 MiB small-pool segment
    a.malloc("g", 20 * MiB, stream="all-gather")  # another stream's segment
    a.free("s")
    a.free("g")
    a.malloc("b", 30 * MiB)  # 22 MiB cached: both handed back
    assert a.reserved == 30 * MiB and a.reserved_by_stream() == {0: 30 * MiB}


def test_expandable_segments_unmap_free_pages_and_map_the_lowest_hole() -> None:
    def run(capacity: int | None) -> CachingAllocator:
        a = CachingAllocator(expandable=True, capacity=capacity)
        a.malloc("a", 30 * MiB)  # two 20 MiB pages mapped: [0, 40)
        a.malloc("b", 30 * MiB)  # the free tail [30, 40) grown by a page: b at [30, 60)
        a.free("a")  # [0, 30) free: its whole page [0, 20) can be unmapped
        a.malloc("c", 50 * MiB)  # three pages at the end, [60, 120)
        return a

    assert run(None).peak_reserved == 120 * MiB
    capped = run(100 * MiB)  # the page under a is handed back: 40 + 60 MiB
    assert capped.reserved == 100 * MiB and capped.retries == 1
    with pytest.raises(OutOfMemory):
        run(100 * MiB - 1)
    # a later request maps the hole at the segment's start again, with the free 10 MiB after it,
    # rather than pages past the end
    capped.capacity = 120 * MiB
    capped.malloc("d", 25 * MiB)
    assert capped.reserved == 120 * MiB
    assert capped.segments == {0: 120 * MiB}
    capped.free("d")
    capped.malloc("e", 30 * MiB)  # [0, 30) free again: no new page
    assert capped.reserved == 120 * MiB


def test_the_need_is_the_least_memory_the_replay_runs_in() -> None:
    events: list[tuple[int, int | None]] = [(1, 30 * MiB), (1, None), (2, 40 * MiB)]
    r = replayed(events, [], needs=True)
    assert r.peak_reserved == 70 * MiB
    assert r.need is not None and 40 * MiB <= r.need <= 40 * MiB + NEED_TOLERANCE
    # the search's answer runs, and less than what it brackets does not
    least = need(events, [], {}, False, r.peak_allocated, r.peak_reserved)
    with pytest.raises(OutOfMemory):
        a = CachingAllocator(capacity=least - NEED_TOLERANCE)
        for key, size in events:
            a.free(key) if size is None else a.malloc(key, size)
    assert replayed(events, []).need is None  # not searched unless asked


def test_a_trace_judged_against_a_small_gpu_keeps_what_a_gpu_near_full_keeps() -> None:
    """A trace with a GPU its whole reserve would not fit searches the least memory its
    allocations replay in, and fit's verdict uses that; with room to spare it does not search."""
    from profiling.config import TrainingConfig
    from profiling.trace.step import trace_step

    base = {"model": "tiny-llama", "batch": 2, "seq": 128, "counter": "nvml", "target": "cuda"}
    roomy = trace_step(TrainingConfig.parse(style="field", **base, gpu_mem=80)).counters
    assert roomy is not None and roomy.need is None and roomy.held() == roomy.reserved.bytes
    small = trace_step(TrainingConfig.parse(style="field", **base, gpu_mem=0.001)).counters
    assert small is not None and small.need is not None
    assert roomy.allocated.bytes <= small.need <= small.reserved.bytes
    assert small.must_fit() == small.nvml.bytes - small.reserved.bytes + small.held()
    # the least memory found runs the step's own allocations; 4 MiB less than it does not
    assert small.held() <= roomy.reserved.bytes


def test_expandable_segments_split_the_large_pool_at_512_bytes() -> None:
    """``should_split``: with expandable segments a large block's rest is split off from 512 B
    on, as the small pool's is; with default segments only above 1 MiB."""
    request = 19 * MiB + MiB // 2  # in one 20 MiB page or segment, 512 KiB to spare
    default, expandable = CachingAllocator(), CachingAllocator(expandable=True)
    for a in (default, expandable):
        a.malloc("x", request)
    assert default.allocated == 20 * MiB  # the rest stays with the request
    assert expandable.allocated == request and expandable.reserved == 20 * MiB
    expandable.free("x")  # the two pieces merge again: a 20 MiB request maps no new page
    expandable.malloc("z", 20 * MiB)
    assert expandable.reserved == 20 * MiB
