"""Memory snapshots in the format ``torch.cuda.memory._dump_snapshot`` writes, for PyTorch's
memory viewer (https://pytorch.org/memory_viz) and ``torch.cuda._memory_viz``.

A snapshot is a pickled dict: ``segments`` (the allocator's state at the end: each segment's
blocks, allocated or free) and ``device_traces`` (per device, every ``alloc`` /
``free_requested`` / ``free_completed`` in order, with its address, size and stack).

- **For a trace** no allocator runs (fake tensors), so the snapshot is built from the traced
  allocations: :class:`SnapshotRecorder` watches the trace's memory tracker at its one choke
  point (``_update_snap``: every storage added, freed, resized), gives each storage an address
  of its own (512-byte aligned, never reused), and keeps its category and the modules it was
  made in as its "stack". Sizes are the tracker's own bytes, so the viewer's peak is the
  trace's peak to the byte.
- **On CUDA** (``profile``), :func:`cuda_history` records the real allocator's history and
  dumps the real snapshot.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from profiling.errors import ProfilingError

if TYPE_CHECKING:
    from torch.distributed._tools.mem_tracker import _WeakRefInfo

    from profiling.trace.tracker import StepTracker

ALIGN = 512  # the caching allocator's smallest block: addresses stay aligned like real ones
BASE_ADDRESS = 0x7F0000000000
HISTORY_ENTRIES = 1_000_000


# The snapshot's shapes, as torch.cuda.memory._snapshot() documents them (the fields we write).
class Frame(TypedDict):
    filename: str
    line: int
    name: str


class TraceEntry(TypedDict):
    action: Literal["alloc", "free_requested", "free_completed"]
    addr: int
    size: int
    stream: int
    frames: list[Frame]
    category: NotRequired[str]  # on an alloc: the tracker's category of the storage


class Block(TypedDict):
    address: int
    size: int
    requested_size: int
    state: Literal["active_allocated", "inactive"]
    frames: list[Frame]


class Segment(TypedDict):
    device: int
    address: int
    total_size: int
    allocated_size: int
    active_size: int
    requested_size: int
    stream: int
    segment_type: Literal["small", "large"]
    segment_pool_id: tuple[int, int]
    is_expandable: bool
    frames: list[Frame]
    blocks: list[Block]


class Snapshot(TypedDict):
    segments: list[Segment]
    device_traces: list[list[TraceEntry]]


class SnapshotRecorder:
    """Records a trace's allocations as a snapshot; ``attach`` it to the memory tracker."""

    def __init__(self) -> None:
        self.events: list[TraceEntry] = []
        self._live: dict[int, TraceEntry] = {}  # id(winfo) -> its alloc event
        self._next = BASE_ADDRESS
        self._tracker: StepTracker | None = None

    def attach(self, tracker: StepTracker) -> None:
        """Record every storage the memory tracker adds and frees (``watch_storages``); what it
        already holds is allocated at the start of the timeline."""
        from profiling.trace.allocations import watch_storages

        self._tracker = tracker
        watch_storages(tracker, self._alloc, self._free, self._live.__contains__)

    def _frames(self, winfo: _WeakRefInfo) -> list[Frame]:
        """The modules the storage was made in (innermost first) and the step's phase."""
        tracker = self._tracker
        assert tracker is not None, "attach() comes first: it is what calls this"
        parents = sorted(getattr(tracker._mod_tracker, "parents", ()), key=len)
        phase = getattr(tracker, "phase", "")
        category = str(getattr(winfo.reftype, "name", winfo.reftype)).lower()
        frames: list[Frame] = [
            {"filename": fqn, "line": 0, "name": category} for fqn in reversed(parents)
        ]
        return [*frames, {"filename": f"phase {phase}", "line": 0, "name": "trace_step"}]

    def _alloc(self, winfo: _WeakRefInfo) -> None:
        size = int(winfo.mem_consumed)
        event: TraceEntry = {
            "action": "alloc",
            "addr": self._next,
            "size": size,  # as requested: the tracker's bytes are the viewer's
            "stream": 0,
            "frames": self._frames(winfo),
            "category": str(getattr(winfo.reftype, "name", winfo.reftype)).lower(),
        }
        self._next += _rounded(size)
        self._live[id(winfo)] = event
        self.events.append(event)

    def _free(self, key: int) -> None:
        alloc = self._live.pop(key)
        for action in ("free_requested", "free_completed"):
            self.events.append(
                {
                    "action": action,
                    "addr": alloc["addr"],
                    "size": alloc["size"],
                    "stream": 0,
                    "frames": alloc["frames"],
                }
            )

    def snapshot(self) -> Snapshot:
        """The snapshot: one segment holding what was allocated when the traced loop ended
        (the model, its gradients and optimizer states as they stay), and the whole trace."""
        blocks: list[Block] = []
        live = sorted(self._live.values(), key=lambda e: e["addr"])
        start = live[0]["addr"] if live else BASE_ADDRESS
        at = start
        for event in live:
            if event["addr"] > at:
                blocks.append(
                    {
                        "address": at,
                        "size": event["addr"] - at,
                        "state": "inactive",
                        "requested_size": 0,
                        "frames": [],
                    }
                )
            blocks.append(
                {
                    "address": event["addr"],
                    "size": event["size"],
                    "requested_size": event["size"],
                    "state": "active_allocated",
                    "frames": event["frames"],
                }
            )
            at = event["addr"] + event["size"]
        total = at - start
        segment: Segment = {
            "device": 0,
            "address": start,
            "total_size": total,
            "allocated_size": sum(e["size"] for e in live),
            "active_size": sum(e["size"] for e in live),
            "requested_size": sum(e["size"] for e in live),
            "stream": 0,
            "segment_type": "large",
            "segment_pool_id": (0, 0),
            "is_expandable": False,
            "frames": [],
            "blocks": blocks,
        }
        return {"segments": [segment] if blocks else [], "device_traces": [list(self.events)]}


def _rounded(size: int) -> int:
    return max(ALIGN, -(-size // ALIGN) * ALIGN)


def write_snapshot(data: Snapshot, path: Path) -> Path:
    """Pickle ``data`` to ``path`` as ``_dump_snapshot`` does (temp file, then rename)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise ProfilingError(f"cannot write {path}: directory {path.parent} does not exist")
    from profiling import _files

    # A random O_EXCL temp name beside it, renamed over it; a link at the name is refused.
    _files.replace(path.parent.absolute(), Path(path.name), pickle.dumps(data))
    return path


@contextlib.contextmanager
def cuda_history(path: Path) -> Iterator[None]:
    """Record the CUDA caching allocator's history inside the block, then dump the real
    snapshot to ``path`` (and stop recording)."""
    import torch

    memory = torch.cuda.memory
    memory._record_memory_history(max_entries=HISTORY_ENTRIES)
    try:
        yield
        memory._dump_snapshot(str(path))
    finally:
        memory._record_memory_history(enabled=None)
