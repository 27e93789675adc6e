"""PyTorch's CUDA caching allocator as a model: what ``torch.cuda.memory_reserved()`` holds after
a sequence of allocations and frees, without a GPU.

The rules are those of ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch 2.x), default settings:

- every request is rounded up to a multiple of 512 B (``kMinBlockSize``);
- requests up to 1 MiB (``kSmallSize``) come from the small pool, whose segments are 2 MiB
  (``kSmallBuffer``); larger ones from the large pool, whose segments are 20 MiB
  (``kLargeBuffer``) for requests under 10 MiB (``kMinLargeAlloc``) and otherwise the request
  rounded up to 2 MiB (``kRoundLarge``);
- a request takes the smallest cached free block of its pool that holds it (best fit, then the
  lowest address); the rest of the block is split off when it is at least 512 B (small pool) or
  more than 1 MiB (large pool), and otherwise stays with the request;
- a freed block merges with free neighbours of its segment and stays cached: reserved memory
  only grows (no ``empty_cache``);
- with ``expandable_segments:True`` each pool is one segment per stream that grows by pages at
  its end when nothing cached fits (a free block at the end is extended): 2 MiB pages for the
  small pool, 20 MiB for the large (``segment_size = pool->is_small ? kSmallBuffer :
  kLargeBuffer``), so no request rounds to a segment of its own;
- blocks are never shared between streams: a block freed goes back to the pools of the stream
  it was allocated on (FSDP2's all-gather and reduce-scatter streams hold their own segments).

A single-GPU trace has one stream; a plan's trace tags FSDP2's. Pure Python.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

MB = 1024 * 1024
MIN_BLOCK = 512
SMALL_SIZE = 1 * MB
SMALL_BUFFER = 2 * MB
LARGE_BUFFER = 20 * MB
MIN_LARGE_ALLOC = 10 * MB
ROUND_LARGE = 2 * MB
PAGES = {True: SMALL_BUFFER, False: LARGE_BUFFER}  # an expandable segment's page, small / large


def round_size(size: int) -> int:
    """The request as the allocator rounds it: a multiple of 512 B, at least 512 B."""
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(rounded: int) -> int:
    """The segment cudaMalloc'd for a request that fits no cached block."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class _Pool:
    small: bool
    # free blocks sorted by (size, segment, offset): best fit is a bisect
    free: list[tuple[int, int, int]] = field(default_factory=list)
    blocks: dict[tuple[int, int], _Block] = field(default_factory=dict)  # (segment, offset)
    ends: dict[tuple[int, int], _Block] = field(default_factory=dict)  # (segment, end)

    def put(self, b: _Block) -> None:
        self.blocks[(b.segment, b.offset)] = b
        self.ends[(b.segment, b.offset + b.size)] = b

    def remove(self, b: _Block) -> None:
        del self.blocks[(b.segment, b.offset)]
        del self.ends[(b.segment, b.offset + b.size)]

    def resize(self, b: _Block, size: int) -> None:
        del self.ends[(b.segment, b.offset + b.size)]
        b.size = size
        self.ends[(b.segment, b.offset + b.size)] = b

    def add_free(self, b: _Block) -> None:
        b.free = True
        bisect.insort(self.free, (b.size, b.segment, b.offset))

    def drop_free(self, b: _Block) -> None:
        i = bisect.bisect_left(self.free, (b.size, b.segment, b.offset))
        del self.free[i]


class CachingAllocator:
    """Allocations and frees in order; ``reserved`` and its peak, as the allocator holds them."""

    def __init__(self, expandable: bool = False) -> None:
        self.expandable = expandable
        self.pools: dict[tuple[object, bool], _Pool] = {}  # (stream, small)
        self.segments: dict[int, int] = {}  # id -> size
        self.segment_stream: dict[int, object] = {}  # id -> the stream it belongs to
        self.live: dict[object, tuple[_Pool, _Block]] = {}
        self.allocated = 0  # rounded bytes of live blocks (what memory_allocated() counts)
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self._expandable_segments: dict[tuple[object, bool], int] = {}
        self._stream: object = 0

    # ------------------------------------------------------------------ requests

    def malloc(self, key: object, size: int, stream: object = 0) -> None:
        """Allocate ``size`` bytes for ``key`` on ``stream`` (its own pools)."""
        rounded = round_size(size)
        small = rounded <= SMALL_SIZE
        pool = self.pools.setdefault((stream, small), _Pool(small=small))
        block = self._best_fit(pool, rounded)
        if block is None:
            self._stream = stream
            block = self._grow(pool, rounded)
        else:
            pool.drop_free(block)
        self._split(pool, block, rounded)
        block.free = False
        self.live[key] = (pool, block)
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def reserved_by_stream(self) -> dict[object, int]:
        """Each stream's segments (bytes)."""
        out: dict[object, int] = {}
        for seg, size in self.segments.items():
            stream = self.segment_stream[seg]
            out[stream] = out.get(stream, 0) + size
        return out

    def free(self, key: object) -> None:
        entry = self.live.pop(key, None)
        if entry is None:
            return
        pool, block = entry
        self.allocated -= block.size
        block = self._merge(pool, block)
        pool.add_free(block)

    # ------------------------------------------------------------------ the rules

    @staticmethod
    def _best_fit(pool: _Pool, rounded: int) -> _Block | None:
        i = bisect.bisect_left(pool.free, (rounded, -1, -1))
        if i == len(pool.free):
            return None
        _, seg, off = pool.free[i]
        return pool.blocks[(seg, off)]

    def _new_segment(self, size: int) -> int:
        seg = len(self.segments)
        self.segments[seg] = size
        self.segment_stream[seg] = self._stream
        self.reserved += size
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return seg

    def _grow(self, pool: _Pool, rounded: int) -> _Block:
        if self.expandable:
            return self._grow_expandable(pool, rounded)
        size = segment_size(rounded)
        seg = self._new_segment(size)
        block = _Block(seg, 0, size, free=False)
        pool.put(block)
        return block

    def _grow_expandable(self, pool: _Pool, rounded: int) -> _Block:
        """The pool's one segment on this stream grows by pages at its end; a free block ending
        there grows with it."""
        where = (self._stream, pool.small)
        if where not in self._expandable_segments:
            self._expandable_segments[where] = self._new_segment(0)
        seg = self._expandable_segments[where]
        end = self.segments[seg]
        tail = pool.ends.get((seg, end))
        have = tail.size if tail is not None and tail.free else 0
        page = PAGES[pool.small]
        more = -(-(rounded - have) // page) * page
        self.segments[seg] += more
        self.reserved += more
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        if tail is not None and tail.free:
            pool.drop_free(tail)
            pool.resize(tail, tail.size + more)
            return tail
        block = _Block(seg, end, more, free=False)
        pool.put(block)
        return block

    @staticmethod
    def _split(pool: _Pool, block: _Block, rounded: int) -> None:
        rest = block.size - rounded
        if (pool.small and rest >= MIN_BLOCK) or (not pool.small and rest > SMALL_SIZE):
            pool.resize(block, rounded)
            tail = _Block(block.segment, block.offset + rounded, rest)
            pool.put(tail)
            pool.add_free(tail)

    @staticmethod
    def _merge(pool: _Pool, block: _Block) -> _Block:
        """Merge with the free neighbours of the same segment."""
        after = pool.blocks.get((block.segment, block.offset + block.size))
        if after is not None and after.free:
            pool.drop_free(after)
            pool.remove(after)
            pool.resize(block, block.size + after.size)
        before = pool.ends.get((block.segment, block.offset))
        if before is not None and before.free:
            pool.drop_free(before)
            pool.remove(block)
            pool.resize(before, before.size + block.size)
            block = before
        return block


__all__ = ["CachingAllocator", "round_size", "segment_size"]
