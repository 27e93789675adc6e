"""PyTorch's CUDA caching allocator as a model: what ``torch.cuda.memory_reserved()`` holds after
a sequence of allocations and frees, without a GPU.

The rules are those of ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch 2.x), default settings:

- every request is rounded up to a multiple of 512 B (``kMinBlockSize``);
- requests up to 1 MiB (``kSmallSize``) come from the small pool, whose segments are 2 MiB
  (``kSmallBuffer``); larger ones from the large pool, whose segments are 20 MiB
  (``kLargeBuffer``) for requests under 10 MiB (``kMinLargeAlloc``) and otherwise the request
  rounded up to 2 MiB (``kRoundLarge``);
- a request takes the smallest cached free block of its pool that holds it (best fit, then the
  lowest address); the rest of the block is split off when it is at least 512 B (small pool, or
  any pool with expandable segments: ``should_split``'s ``is_expandable_segments_active``) or
  more than 1 MiB (large pool), and otherwise stays with the request;
- a freed block merges with free neighbours of its segment and stays cached: reserved memory
  only grows (no ``empty_cache``);
- with ``expandable_segments:True`` each pool is one segment per stream that grows by pages at
  its end when nothing cached fits (a free block at the end is extended): 2 MiB pages for the
  small pool, 20 MiB for the large (``segment_size = pool->is_small ? kSmallBuffer :
  kLargeBuffer``), so no request rounds to a segment of its own;
- blocks are never shared between streams: a block freed goes back to the pools of the stream
  it was allocated on (FSDP2's all-gather and reduce-scatter streams hold their own segments);
- on a GPU of finite memory (``capacity``: what the allocator may reserve, the GPU less the
  CUDA context and whatever else holds memory outside it), a segment that would not fit is not
  yet out of memory: ``DeviceCachingAllocator::malloc`` first calls
  ``release_available_cached_blocks`` (a no-op unless ``max_split_size_mb`` is set: it returns
  at once when ``max_split_size`` is ``SIZE_MAX``, the default), then
  ``release_cached_blocks`` — every cached segment with no live block, in every pool and on
  every stream, is handed back to CUDA (``release_blocks``: a block with neither ``prev`` nor
  ``next``; an expandable segment unmaps the whole pages of its free blocks) — and retries the
  one ``cudaMalloc``; only when that fails too is ``OutOfMemoryError`` raised. The cached pool is
  not searched again between (the freed segments held no block large enough).

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
    mapped: bool = True  # False: an expandable segment's pages handed back (a hole, never free)


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


class OutOfMemory(Exception):
    """The request the allocator could not serve on a GPU of ``capacity`` bytes, even after
    handing every cached segment with no live block back to CUDA."""

    def __init__(self, size: int, reserved: int, allocated: int, capacity: int) -> None:
        super().__init__(f"out of memory: {size:,} B asked with {reserved:,} B reserved "
                         f"({allocated:,} B allocated) of {capacity:,} B")  # fmt: skip
        self.size, self.reserved, self.allocated = size, reserved, allocated


class CachingAllocator:
    """Allocations and frees in order; ``reserved`` and its peak, as the allocator holds them.
    ``capacity`` (bytes it may reserve; None: a GPU that never runs out): a new segment past it
    first makes the allocator release its cached segments and retry, then raises
    :class:`OutOfMemory`."""

    def __init__(self, expandable: bool = False, capacity: int | None = None) -> None:
        self.expandable = expandable
        self.capacity = capacity
        self.retries = 0  # torch.cuda.memory_stats()'s num_alloc_retries
        self.pools: dict[tuple[object, bool], _Pool] = {}  # (stream, small)
        self.segments: dict[int, int] = {}  # id -> size
        self.segment_stream: dict[int, object] = {}  # id -> the stream it belongs to
        self.live: dict[object, tuple[_Pool, _Block]] = {}
        self.allocated = 0  # rounded bytes of live blocks (what memory_allocated() counts)
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self._expandable_segments: dict[tuple[object, bool], int] = {}
        self._ends: dict[int, int] = {}  # an expandable segment's end: its pages and holes
        self._holes: dict[int, set[int]] = {}  # an expandable segment's unmapped ranges' offsets
        self._next_segment = 0
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
        seg = self._next_segment
        self._next_segment += 1
        self.segments[seg] = size
        self.segment_stream[seg] = self._stream
        self._reserve(size)
        return seg

    def _reserve(self, size: int) -> None:
        self.reserved += size
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def _room(self, size: int) -> bool:
        return self.capacity is None or self.reserved + size <= self.capacity

    def _out_of_memory(self, rounded: int) -> OutOfMemory:
        assert self.capacity is not None
        return OutOfMemory(rounded, self.reserved, self.allocated, self.capacity)

    def _grow(self, pool: _Pool, rounded: int) -> _Block:
        if self.expandable:
            return self._grow_expandable(pool, rounded)
        size = segment_size(rounded)
        if not self._room(size):  # cudaMalloc failed: release every cached segment, retry once
            self.retries += 1
            self.release_cached()
            if not self._room(size):
                raise self._out_of_memory(rounded)
        seg = self._new_segment(size)
        block = _Block(seg, 0, size, free=False)
        pool.put(block)
        return block

    def release_cached(self) -> None:
        """``release_cached_blocks``: every segment with no live block back to CUDA (all pools,
        all streams); an expandable segment unmaps the whole pages of each free block."""
        for pool in self.pools.values():
            for _, seg, off in list(pool.free):
                block = pool.blocks[(seg, off)]
                if seg in self._ends:
                    self._unmap(pool, block)
                elif off == 0 and block.size == self.segments[seg]:
                    pool.drop_free(block)
                    pool.remove(block)
                    self.reserved -= self.segments.pop(seg)
                    del self.segment_stream[seg]

    # ------------------------------------------------------------------ expandable segments

    def _unmap(self, pool: _Pool, block: _Block) -> None:
        """The whole pages inside a free block handed back: the block keeps what is left
        either side of them; the pages become a hole (or shorten the segment, at its end)."""
        page, seg = PAGES[pool.small], block.segment
        lo = -(-block.offset // page) * page
        hi = (block.offset + block.size) // page * page
        if hi <= lo:
            return
        pool.drop_free(block)
        pool.remove(block)
        end = block.offset + block.size
        for a, b in ((block.offset, lo), (hi, end)):
            if b > a:
                rest = _Block(seg, a, b - a)
                pool.put(rest)
                pool.add_free(rest)
        self.segments[seg] -= hi - lo
        self.reserved -= hi - lo
        if hi == self._ends[seg]:  # the segment's end: it shrinks (with a hole before it)
            before = pool.ends.get((seg, lo))
            if before is not None and not before.mapped:
                pool.remove(before)
                self._holes[seg].discard(before.offset)
                lo = before.offset
            self._ends[seg] = lo
            return
        hole = _Block(seg, lo, hi - lo, free=False, mapped=False)
        for nb in (pool.ends.get((seg, lo)), pool.blocks.get((seg, hi))):
            if nb is not None and not nb.mapped:  # holes side by side are one
                pool.remove(nb)
                self._holes[seg].discard(nb.offset)
                hole = _Block(seg, min(hole.offset, nb.offset), hole.size + nb.size,
                              free=False, mapped=False)  # fmt: skip
        pool.put(hole)
        self._holes[seg].add(hole.offset)

    def _run(self, pool: _Pool, seg: int, offset: int, rounded: int) -> list[_Block] | None:
        """The free and unmapped blocks from ``offset`` on holding ``rounded`` bytes (the
        segment's end has room without bound), or None."""
        run: list[_Block] = []
        total, at, end = 0, offset, self._ends[seg]
        while total < rounded:
            if at >= end:
                return run
            block = pool.blocks.get((seg, at))
            if block is None or not (block.free or not block.mapped):
                return None
            run.append(block)
            total += block.size
            at += block.size
        return run

    def _find_expandable(self, pool: _Pool, seg: int, rounded: int) -> tuple[int, list[_Block]]:
        """``find_expandable_block``: the lowest hole (or the segment's end) that, with the free
        block just before it and what follows, holds the request."""
        for at in [*sorted(self._holes[seg]), self._ends[seg]]:
            prev = pool.ends.get((seg, at))
            start = prev.offset if prev is not None and prev.free else at
            run = self._run(pool, seg, start, rounded)
            if run is not None:
                return start, run
        raise AssertionError("the segment's end always has room")

    def _grow_expandable(self, pool: _Pool, rounded: int) -> _Block:
        """The pool's one segment on this stream maps pages into its lowest hole, or at its
        end, that holds the request with the free blocks beside it (``map_block``); when the
        GPU has no room for them the cached pages are unmapped first and the search redone."""
        where = (self._stream, pool.small)
        if where not in self._expandable_segments:
            seg = self._new_segment(0)
            self._expandable_segments[where] = seg
            self._ends[seg], self._holes[seg] = 0, set()
        seg, page = self._expandable_segments[where], PAGES[pool.small]
        start, run = self._find_expandable(pool, seg, rounded)
        if not self._room(self._pages_needed(run, rounded, page)):
            self.retries += 1
            self.release_cached()
            start, run = self._find_expandable(pool, seg, rounded)
            if not self._room(self._pages_needed(run, rounded, page)):
                raise self._out_of_memory(rounded)
        covered = 0
        for block in run:
            if covered >= rounded:
                break
            pool.remove(block)
            if block.mapped:
                pool.drop_free(block)
                covered += block.size
                continue
            take = min(block.size, -(-(rounded - covered) // page) * page)
            self._holes[seg].discard(block.offset)
            if take < block.size:  # the hole's rest stays a hole after the mapped pages
                rest = _Block(seg, block.offset + take, block.size - take, free=False, mapped=False)
                pool.put(rest)
                self._holes[seg].add(rest.offset)
            covered += take
            self.segments[seg] += take
            self._reserve(take)
        if covered < rounded:  # the segment's end: map pages past it
            take = -(-(rounded - covered) // page) * page
            self._ends[seg] += take
            self.segments[seg] += take
            self._reserve(take)
            covered += take
        after = pool.blocks.get((seg, start + covered))
        if after is not None and after.free:  # map_block merges the pages with free neighbours
            pool.drop_free(after)
            pool.remove(after)
            covered += after.size
        block = _Block(seg, start, covered, free=False)
        pool.put(block)
        return block

    @staticmethod
    def _pages_needed(run: list[_Block], rounded: int, page: int) -> int:
        """Bytes of pages mapping ``run`` to hold ``rounded`` bytes needs."""
        covered = need = 0
        for block in run:
            if covered >= rounded:
                break
            take = block.size if block.mapped else min(
                block.size, -(-(rounded - covered) // page) * page)  # fmt: skip
            covered += take
            need += 0 if block.mapped else take
        if covered < rounded:
            need += -(-(rounded - covered) // page) * page
        return need

    def _split(self, pool: _Pool, block: _Block, rounded: int) -> None:
        rest = block.size - rounded
        fine = pool.small or self.expandable  # should_split: 512 B, else more than 1 MiB
        if (fine and rest >= MIN_BLOCK) or (not fine and rest > SMALL_SIZE):
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


__all__ = ["CachingAllocator", "OutOfMemory", "round_size", "segment_size"]
