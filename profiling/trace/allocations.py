"""The trace's allocations in order, replayed through the caching allocator's model
(``profiling.estimate.allocator``): what ``memory_reserved()`` would hold on a GPU.

:class:`AllocationLog` watches the memory tracker at its one choke point (``_update_snap``:
every storage added, freed or resized, as the snapshot recorder does) and keeps the sequence
of (storage, bytes) allocations and frees, from the model's parameters through both steps of the
loop. :func:`replayed` runs it through the allocator, default and with expandable segments, with
cuBLAS's workspaces allocated first (as the first matmul allocates them); with ``needs`` it also
finds the least memory the allocator must be allowed for the step to run at all (:func:`need`):
on a GPU near full the allocator hands its cached segments back and retries before it runs out,
so that, not the reserve of a GPU that never runs out, is what must fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from profiling.estimate.allocator import CachingAllocator, OutOfMemory
from profiling.estimate.counters import Counters, from_replay, workspaces

DEFAULT_STREAM = "default"  # the stream compute runs on (forward, backward, optimizer)

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch.distributed._tools.mem_tracker import _UpdateType, _WeakRefInfo

    from profiling.config import TrainingConfig
    from profiling.trace.tracker import StepTracker


class Replay(BaseModel):
    """Peaks of the replayed allocator (bytes)."""

    allocations: int  # requests replayed
    peak_allocated: int  # the rounded blocks' peak (memory_allocated's)
    # with expandable segments, where every block is split to its 512-byte request (None: as
    # the default's)
    peak_allocated_expandable: int | None = None
    peak_reserved: int  # default allocator
    peak_reserved_expandable: int  # expandable_segments:True
    how: str = ""  # anything the replay's counters say beside it
    # each stream's segments at the end, default and expandable (a plan's FSDP2 streams)
    by_stream: dict[str, int] = {}
    by_stream_expandable: dict[str, int] = {}
    # the least the allocator must be allowed (bytes, within NEED_TOLERANCE) for the step to run,
    # cached segments handed back and the request retried; None: not searched
    need: int | None = None
    need_expandable: int | None = None

    def counters(self, config: TrainingConfig, paged: int = 0, floor: int = 0) -> Counters:
        """The counters of this replay; ``floor``: the least allocated (a pipeline rank's
        composed peak + workspaces, which the replay of torch's whole schedule may stay under)."""
        exp = config.expandable_segments
        needed = self.need_expandable if exp else self.need
        allocated = self.peak_allocated
        if exp and self.peak_allocated_expandable is not None:
            allocated = self.peak_allocated_expandable
        how = self.how
        if floor > allocated:
            allocated = floor
            how = "; ".join(filter(None, (how, "at least the rank's composed peak")))
        return from_replay(
            config, allocated, self.peak_reserved, self.peak_reserved_expandable,
            self.allocations, how, paged, needed,
        )  # fmt: skip


def watch_storages(
    tracker: StepTracker,
    alloc: Callable[[_WeakRefInfo], None],
    free: Callable[[int], None],
    live: Callable[[int], bool],
) -> None:
    """Wrap ``tracker._update_snap`` (MemTracker's one place where memory changes): ``alloc``
    for every storage it adds or resizes to a size, ``free(id(winfo))`` for every live one it
    drops or resizes, while the loop runs (not while the model is torn down after it); and
    ``alloc`` at once for what it already holds (the model's parameters and buffers, tracked
    when it was made). ``live(id(winfo))``: whether the watcher holds that storage."""
    original = tracker._update_snap
    entered = False

    # torch's own signature: (u_type, winfo, old_mem_consumed=None, old_reftype=None)
    def update_snap(u_type: _UpdateType, winfo: _WeakRefInfo, *args: Any, **kwargs: Any) -> None:
        nonlocal entered
        kind = getattr(u_type, "name", str(u_type))
        depth = getattr(tracker, "_depth", 1)
        entered = entered or depth > 0
        if entered and depth == 0:  # the loop is over: the model being torn down
            original(u_type, winfo, *args, **kwargs)
            return
        if kind in ("DEL", "SIZE") and live(id(winfo)):
            free(id(winfo))
        original(u_type, winfo, *args, **kwargs)
        if kind in ("ADD", "SIZE") and winfo.mem_consumed > 0:
            alloc(winfo)

    tracker._update_snap = update_snap
    for winfo, _ in list(getattr(tracker, "_WINFO", {}).values()):
        if winfo.mem_consumed > 0 and not live(id(winfo)):
            alloc(winfo)


class AllocationLog:
    """(key, bytes) for an allocation and (key, None) for a free, in order; ``streams`` the
    stream of each allocation made off the default stream, by its index in ``events``
    (``stream_now`` says which stream an allocation happens on: a plan's trace tags FSDP2's)."""

    def __init__(self, stream_now: Callable[[], str] | None = None) -> None:
        self.events: list[tuple[int, int | None]] = []
        self.streams: dict[int, str] = {}
        self._live: set[int] = set()
        self._stream_now = stream_now

    def attach(self, tracker: StepTracker) -> None:
        watch_storages(tracker, self._alloc, self._free, self._live.__contains__)

    def _alloc(self, winfo: _WeakRefInfo) -> None:
        self._live.add(id(winfo))
        stream = self._stream_now() if self._stream_now is not None else DEFAULT_STREAM
        if stream != DEFAULT_STREAM:
            self.streams[len(self.events)] = stream
        self.events.append((id(winfo), int(winfo.mem_consumed)))

    def _free(self, key: int) -> None:
        self._live.discard(key)
        self.events.append((key, None))


def _replay(
    events: list[tuple[int, int | None]],
    workspaces: list[int],
    streams: dict[int, str],
    expandable: bool,
    capacity: int | None = None,
) -> CachingAllocator:
    """The allocator after ``events`` (raises :class:`OutOfMemory` past ``capacity``)."""
    alloc = CachingAllocator(expandable=expandable, capacity=capacity)
    for i, size in enumerate(workspaces):
        alloc.malloc(("workspace", i), size, DEFAULT_STREAM)
    malloc, free, on = alloc.malloc, alloc.free, streams.get
    for i, (key, size) in enumerate(events):
        if size is None:
            free(key)
        else:
            malloc(key, size, on(i, DEFAULT_STREAM))
    return alloc


# The need's scan: capacities from the reserved peak down, NEED_STEPS of them between it and the
# allocated peak (at least NEED_TOLERANCE apart) — a need is at most one step above the least
NEED_TOLERANCE = 4 * 2**20
NEED_STEPS = 64


def runs(
    events: list[tuple[int, int | None]],
    workspaces: list[int],
    streams: dict[int, str],
    expandable: bool,
    capacity: int,
) -> bool:
    """Whether every request of ``events`` is served within ``capacity`` bytes (cached segments
    handed back and the request retried where a segment would not fit)."""
    try:
        _replay(events, workspaces, streams, expandable, capacity)
    except OutOfMemory:
        return False
    return True


def need_step(allocated: int, reserved: int) -> int:
    """The need scan's step (bytes): 1/NEED_STEPS of reserved − allocated, NEED_TOLERANCE at
    least."""
    return max(NEED_TOLERANCE, -(-(reserved - allocated) // NEED_STEPS))


def need(
    events: list[tuple[int, int | None]],
    workspaces: list[int],
    streams: dict[int, str],
    expandable: bool,
    allocated: int,
    reserved: int,
    budget: int | None = None,
) -> int:
    """The least memory (within ``need_step`` above it) the allocator may reserve from which
    every larger capacity serves every request of ``events``, releasing its cached segments and
    retrying where a segment would not fit: capacities from the ``reserved`` peak of a GPU that
    never runs out (always enough) down by ``need_step``, and ``budget`` itself (the GPU
    judged against) among them, until the first that runs out.

    Not a bisection: whether the replay runs is not monotone in the capacity. A release forced
    early hands back segments a later request would have been carved from, so a step can run
    in less memory and run out in more (llama-7b QLoRA r16 bf16, 6 × 512: the replay runs in
    19.53 and 19.80 GB, runs out in 19.60-19.70 and 19.85-20.20 GB; its reserve is 20.29 GB) —
    a bisection reported 19.53 GB, which a GPU leaving 19.6 GB to the allocator would run out
    in. The GPU's own capacity is replayed exactly, not only the scan's grid near it."""
    step = need_step(allocated, reserved)
    grid = {reserved - k * step for k in range(1, (reserved - allocated) // step + 1)}
    if budget is not None and allocated <= budget < reserved:
        grid.add(budget)
    least = reserved
    for capacity in sorted(grid, reverse=True):
        if not runs(events, workspaces, streams, expandable, capacity):
            break
        least = capacity
    return least


def replayed(
    events: list[tuple[int, int | None]],
    workspaces: list[int],
    streams: dict[int, str] | None = None,
    needs: bool = False,
) -> Replay:
    """The allocator's peaks over ``events``, after ``workspaces`` (cuBLAS's, held for good);
    an allocation whose index in ``events`` ``streams`` names comes from that stream's own
    pools; ``needs``: also the least memory each way must be allowed (:func:`need`)."""
    streams = streams or {}
    peaks = [_replay(events, workspaces, streams, expandable) for expandable in (False, True)]
    needed = [
        need(events, workspaces, streams, expandable, roomy.peak_allocated, roomy.peak_reserved)
        if needs
        else None
        for expandable, roomy in zip((False, True), peaks, strict=True)
    ]
    return Replay(
        allocations=sum(1 for _, size in events if size is not None),
        peak_allocated=peaks[0].peak_allocated,
        peak_allocated_expandable=peaks[1].peak_allocated,
        peak_reserved=peaks[0].peak_reserved,
        peak_reserved_expandable=peaks[1].peak_reserved,
        by_stream={str(k): v for k, v in peaks[0].reserved_by_stream().items()},
        by_stream_expandable={str(k): v for k, v in peaks[1].reserved_by_stream().items()},
        need=needed[0],
        need_expandable=needed[1],
    )


def counted(config: TrainingConfig) -> bool:
    """Whether the trace keeps its allocations to replay (``--counter reserved|nvml``)."""
    return config.counter != "allocated"


def replay_of(config: TrainingConfig, log: AllocationLog | None) -> Replay | None:
    """The replay of ``log``. Judged against a GPU (``--gpu-mem``/``--gpu``) that its reserve
    with the CUDA context would not fit, the least memory the step needs is searched too (a
    dozen replays more: only where it decides the verdict)."""
    if log is None:
        return None
    ws = workspaces(config)
    replay = replayed(log.events, ws, log.streams)
    avail = config.gpu_mem_bytes()
    if avail is None:
        return replay
    from profiling.estimate.counters import context
    from profiling.estimate.render import SAFETY_MARGIN

    budget = avail * (1 - SAFETY_MARGIN) - context(config)
    exp = config.expandable_segments
    reserved = replay.peak_reserved_expandable if exp else replay.peak_reserved
    if reserved > budget:  # the whole reserve would not fit: what a GPU near full keeps
        allocated = replay.peak_allocated_expandable if exp else replay.peak_allocated
        least = need(log.events, ws, log.streams, exp, allocated or replay.peak_allocated,
                     reserved, int(budget))  # fmt: skip
        replay = replay.model_copy(update={"need_expandable" if exp else "need": least})
    return replay


__all__ = [
    "DEFAULT_STREAM",
    "AllocationLog",
    "Replay",
    "counted",
    "need",
    "need_step",
    "replay_of",
    "replayed",
    "runs",
    "watch_storages",
]
