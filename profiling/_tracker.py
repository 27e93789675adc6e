"""PyTorch's memory trackers, wrapped: categories, phase snapshots, module table, fast peaks."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
from copy import deepcopy
from typing import Any

import torch
from pydantic import BaseModel
from torch import nn

# MemTracker's category names -> ours. FSDPMemTracker adds the sharded/unsharded split.
_CATEGORY = {
    "Parameter": "parameters",
    "Sharded Param": "parameters",
    "Unsharded Param": "parameters",
    "All Gather": "parameters",
    "Gradient": "gradients",
    "Sharded Grad": "gradients",
    "Unsharded Grad": "gradients",
    "Reduce Scatter": "gradients",
    "Optstate": "optimizer",
    "OptState": "optimizer",
    "Activation": "activations",
    "Inputs": "inputs",
    "Temp": "temporaries",
    "Buffer": "buffers",
    # track_external tags the step's inputs as "Other": nothing else is registered that way.
    "Other": "inputs",
}
CATEGORIES = (
    "parameters",
    "gradients",
    "optimizer",
    "activations",
    "temporaries",
    "buffers",
    "inputs",
    "other",
)


class ModuleMemory(BaseModel):
    parameters: int
    buffers: int
    inputs: int
    outputs: int
    peak_forward: int
    peak_backward: int


def to_categories(snapshot: dict[str, int]) -> dict[str, int]:
    out = dict.fromkeys(CATEGORIES, 0)
    for key, value in snapshot.items():
        if key == "Total":
            continue
        out[_CATEGORY.get(key, "other")] += int(value)
    return out


def _total(snapshots: dict[Any, dict[str, int]]) -> int:
    return sum(int(s.get("Total", 0)) for s in snapshots.values())


def merge_snapshots(snapshots: dict[Any, dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for snap in snapshots.values():
        for key, value in snap.items():
            merged[key] = merged.get(key, 0) + int(value)
    return merged


def phase_snapshot(tracker: Any) -> dict[str, int]:
    snap = merge_snapshots(tracker.get_tracker_snapshot())
    return {**to_categories(snap), "total": int(snap.get("Total", 0))}


def module_table(tracker: Any, depth: int) -> dict[str, ModuleMemory]:
    table: dict[str, ModuleMemory] = {}
    for module, stats in tracker.memory_tracking.items():
        fqn = stats.mod_fqn
        if fqn.count(".") > depth:  # the root's fqn is its class name: depth 0
            continue

        def peak(*states: str, stats: Any = stats) -> int:
            snaps = [s for key, v in stats.snapshots.items() if key.value in states for s in v]
            return max((_total(s) for s in snaps), default=0)

        params = getattr(stats, "parameter_mem", None)
        if params is None:  # FSDP stats carry no sizes: count this rank's shards
            params = sum(
                (lp := getattr(p, "_local_tensor", p)).numel() * lp.element_size()
                for p in module.parameters()
            )
        table[fqn] = ModuleMemory(
            parameters=int(params),
            buffers=int(getattr(stats, "buffer_mem", 0)),
            inputs=int(getattr(stats, "input_mem", 0)),
            outputs=int(getattr(stats, "output_mem", 0)),
            peak_forward=peak("Peak-Forward", "Peak Forward"),
            peak_backward=peak("Peak-Backward", "Peak Backward"),
        )
    return table


class _FastPeakMixin:
    """The same peak bookkeeping as ``MemTracker._update_peak_stats``, without its hot loop.

    Upstream walks every tracked module (a weak-key dictionary) on every op to find the active
    ones; on a 7B model that is most of the trace time. We index the module stats by name,
    rebuild the index when modules are added, and visit only the active parents.
    """

    _fast_index: dict[str, list[Any]]
    _fast_index_len: int = -1

    def _update_peak_stats(self, peak_state: Any) -> None:
        tracking = self.memory_tracking  # type: ignore[attr-defined]
        if len(tracking) != self._fast_index_len:
            self._fast_index = {}
            for stats in tracking.values():
                self._fast_index.setdefault(stats.mod_fqn, []).append(stats)
            self._fast_index_len = len(tracking)
        curr_snap = self._curr_mem_snap  # type: ignore[attr-defined]
        for fqn in self._mod_tracker.parents:  # type: ignore[attr-defined]
            for stats in self._fast_index.get(fqn, ()):
                if stats.mod_fqn != fqn or peak_state not in stats.snapshots:
                    continue
                for dev, dev_snap in curr_snap.items():
                    if stats.local_peak.get(dev, 0) < dev_snap["Total"]:
                        stats.local_peak[dev] = dev_snap["Total"]
                        stats.snapshots[peak_state][-1][dev] = deepcopy(dev_snap)
        for dev, dev_snap in curr_snap.items():
            if self._peak_mem.get(dev, 0) < dev_snap["Total"]:  # type: ignore[attr-defined]
                self._peak_mem[dev] = dev_snap["Total"]  # type: ignore[attr-defined]
                self._peak_mem_snap[dev] = deepcopy(dev_snap)  # type: ignore[attr-defined]


# The fast bookkeeping replays upstream's ``_update_peak_stats`` exactly as written in these
# torch versions (fingerprint of its syntax tree, comments and layout ignored). Any other
# version, or an upstream whose method changed, gets torch's tracker unchanged: slower, never
# different. Add a fingerprint only after ``test_fast_tracker_matches_upstream`` passes on it.
FAST_TRACKER_MIN_TORCH = (2, 5)
_KNOWN_PEAK_STATS_FINGERPRINTS = frozenset(
    {"91cba7ae5e40d02bca77607ff1d7c560a2f008fac8f38c07d95fc59f305e09ee"}  # torch 2.13
)
_FAST_STATE_ATTRS = ("memory_tracking", "_curr_mem_snap", "_peak_mem", "_peak_mem_snap")


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def _fingerprint(method: Any) -> str | None:
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):  # no source shipped (frozen / stripped installs)
        return None
    return hashlib.sha256(ast.dump(ast.parse(source)).encode()).hexdigest()


@functools.cache
def fast_tracker_supported() -> bool:
    """True when this torch's MemTracker is the one ``_FastPeakMixin`` was checked against."""
    if _torch_version() < FAST_TRACKER_MIN_TORCH:
        return False
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError:
        return False
    method = getattr(MemTracker, "_update_peak_stats", None)
    if method is None or _fingerprint(method) not in _KNOWN_PEAK_STATS_FINGERPRINTS:
        return False
    probe = MemTracker()
    return all(hasattr(probe, a) for a in _FAST_STATE_ATTRS) and hasattr(
        getattr(probe, "_mod_tracker", None), "parents"
    )


def is_fast_tracker(tracker: Any) -> bool:
    return isinstance(tracker, _FastPeakMixin)


def make_tracker(
    model: nn.Module, optimizer: Any, inputs: tuple[Any, ...], mesh: Any, fast: bool = True
) -> Any:
    """Torch's tracker, with the fast peak bookkeeping when ``fast`` and this torch allows it."""
    fast = fast and fast_tracker_supported()
    if mesh is not None:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
        from torch.distributed._tools.mem_tracker import MemTracker

        # An FSDP-specific override would be shadowed by the mixin: keep upstream's then.
        fast = fast and FSDPMemTracker._update_peak_stats is MemTracker._update_peak_stats
        cls = type("_FastFSDPMemTracker", (_FastPeakMixin, FSDPMemTracker), {})
        tracker = (cls if fast else FSDPMemTracker)(model, optimizer)
        tracker.track_inputs(inputs)
        return tracker
    from torch.distributed._tools.mem_tracker import MemTracker

    cls = type("_FastMemTracker", (_FastPeakMixin, MemTracker), {})
    tracker = cls() if fast else MemTracker()
    tracker.track_external(model, optimizer, *[t for t in inputs if isinstance(t, torch.Tensor)])
    return tracker
