"""PyTorch's memory trackers, wrapped: categories, phase snapshots, module table, fast peaks.

Two things are added to torch's ``MemTracker`` / ``FSDPMemTracker`` for every trace
(``_StepMixin``), whichever peak bookkeeping is used:

- Categories that mean one thing. Upstream tags everything the optimizer step allocates as
  optimizer state; we tag it ``temporaries`` while the step runs, and the states the optimizer
  keeps are re-tagged ``optimizer`` by the step's post-hook (upstream's own re-tagging). So in a
  steady-state step ``optimizer`` is exactly the optimizer's state and ``temporaries`` holds the
  foreach / DTensor / fp32-master scratch that the step allocates and frees.
- FLOPs, counted per op with ``torch.utils.flop_counter``'s formulas and attributed to the
  modules the memory tracker sees active, forward and backward apart.
- Segment maxima (for the block-scaled trace): the highest total, with its categories, of each
  stretch of the step — before the repeated blocks, inside block *i*, after them — per phase.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel
from torch import nn

from profiling.trace._torch_compat import (
    active_fake_mode,
    cpu_flash_formulas,
    safe_flop_formulas,
    torch_version,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch.distributed._tools.mem_tracker import MemTracker, _ModMemStats, _ModState, _RefType
    from torch.distributed._tools.mod_tracker import ModTracker
    from torch.distributed.device_mesh import DeviceMesh
    from torch.utils.weak import WeakIdKeyDictionary

# A per-device memory snapshot, as MemTracker keeps them: device -> category -> bytes.
Snapshot = dict["torch.device", dict[str, int]]

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
    "DDP Bucket": "buckets",  # profiling.trace.ddp's Reducer buckets
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
    out: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    for key, value in snapshot.items():
        if key == "Total":
            continue
        category = _CATEGORY.get(key, "other")  # "buckets" only where DDP's were made
        out[category] = out.get(category, 0) + int(value)
    return out


def _total(snapshots: Snapshot) -> int:
    return sum(int(s.get("Total", 0)) for s in snapshots.values())


def merge_snapshots(snapshots: Snapshot) -> dict[str, int]:
    merged: dict[str, int] = {}
    for snap in snapshots.values():
        for key, value in snap.items():
            merged[key] = merged.get(key, 0) + int(value)
    return merged


def phase_snapshot(tracker: MemTracker) -> dict[str, int]:
    snap = merge_snapshots(tracker.get_tracker_snapshot())
    return {**to_categories(snap), "total": int(snap.get("Total", 0))}


def module_table(tracker: MemTracker, depth: int) -> dict[str, ModuleMemory]:
    table: dict[str, ModuleMemory] = {}
    for module, stats in tracker.memory_tracking.items():
        fqn = stats.mod_fqn
        if fqn.count(".") > depth:  # the root's fqn is its class name: depth 0
            continue

        def peak(*states: str, stats: _ModMemStats = stats) -> int:
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


class _NoHook:
    """A hook handle for a parameter that has no hook (a frozen one): nothing to remove."""

    def remove(self) -> None:
        return None


_NO_HOOK = _NoHook()


class _StepMixin:
    """Categories, nested optimizer steps, FLOPs and segment maxima (see the module docstring)."""

    _opt_depth: int = 0
    phase: str = "setup"  # set by the trace: forward, backward, optimizer_step, ...
    count_flops: bool = False
    flops: dict[str, dict[str, int]]  # module fqn -> {"forward": n, "backward": n}
    block_prefix: str | None = None  # e.g. "Llama.layers." : segment maxima per block
    segments: dict[str, dict[str, int]]  # "phase|role" -> the largest snapshot seen there
    _blocks_seen: bool = False
    entry_fake_mode: object = None  # the FakeTensorMode active at entry, compared by identity
    formulas: dict[object, Callable[..., int]]  # op overload packet -> its FLOP formula
    flop_failures: dict[str, str]
    # What this mixin uses of torch's MemTracker (private API), which it is mixed into.
    _in_opt: bool
    # MemTracker's _MemRefType or FSDP's _FSDPRefType: two enums (not one the other's subclass)
    # that both have OPT and TEMP; no torch type names that.
    _ref_class: Any
    _mod_tracker: ModTracker
    _curr_mem_snap: Snapshot
    _peak_mem: dict[torch.device, int]
    _peak_mem_snap: Snapshot
    get_tracker_snapshot: Callable[..., dict[torch.device, dict[str, int]]]
    _update_and_maybe_create_winfos: Callable[..., object]
    _param_to_grad_hook_handles: WeakIdKeyDictionary
    _WINFO: WeakIdKeyDictionary
    _update_snap: Callable[..., None]
    _delete_callback: Callable[..., None]

    def _track_module_params_and_buffers(
        self, module: nn.Module, install_grad_hooks: bool = True
    ) -> tuple[int, int]:
        # Upstream hooks every parameter's gradient, and register_hook refuses a frozen one
        # (LoRA's base weights, QLoRA's packed storage): those get no hook, as they get no
        # gradient. A placeholder in upstream's table makes it skip them.
        for p in module.parameters():
            if not p.requires_grad and self._param_to_grad_hook_handles.get(p) is None:
                self._param_to_grad_hook_handles[p] = (_NO_HOOK, _NO_HOOK)
        return super()._track_module_params_and_buffers(module, install_grad_hooks)  # type: ignore[misc]  # MemTracker's, next in the MRO

    def _track(self, reftype: _RefType, t: torch.Tensor) -> None:
        if self._in_opt and reftype == self._ref_class.OPT:
            reftype = self._ref_class.TEMP
        from torch.distributed._tools.common_utils import get_untyped_storages

        storages = get_untyped_storages(t)
        if len(storages) <= 1:
            super()._track(reftype, t)  # type: ignore[misc]  # MemTracker's, next in the MRO
            return
        # A tensor subclass of several storages, each on its own: torch's _track (2.13)
        # returns at the first it already knows, so a new storage beside a known one went
        # uncounted whenever the set (ordered by address) gave the known one first — torchao's
        # all-gathered Float8TrainingTensor (new fp8 data, the input's scale) counted in some
        # runs and not in others
        for st in storages:
            self._track_storage(reftype, st, t.device)

    def _track_storage(self, reftype: _RefType, st: torch.UntypedStorage, device: Any) -> None:
        """MemTracker._track's body for one storage: a size change, or a new one counted."""
        from torch.distributed._tools.mem_tracker import _UpdateType, _WeakRefInfo

        found = self._WINFO.get(st)
        if found is not None:
            winfo = found[0]
            if winfo.size != st.size():
                old = winfo.mem_consumed
                winfo.update_mem_consumed(st)
                self._update_snap(_UpdateType.SIZE, winfo, old_mem_consumed=old)
            return
        winfo, w_st = _WeakRefInfo.create_winfo(st, device, reftype, self._delete_callback)
        self._WINFO[st] = (winfo, w_st)
        if winfo.mem_consumed > 0:
            self._update_snap(_UpdateType.ADD, winfo)

    def _track_optimizer_states(self, reftype: _RefType, optimizer: torch.optim.Optimizer) -> None:
        super()._track_optimizer_states(reftype, optimizer)  # type: ignore[misc]  # MemTracker's, next in the MRO
        # An fp32 gradient copy kept by the optimizer (DeepSpeed's) is a gradient, not state.
        keys = getattr(optimizer, "gradient_state_keys", ())
        grad = getattr(self._ref_class, "GRAD", None)
        if keys and grad is not None:
            for state in optimizer.state.values():
                for key in keys:
                    if isinstance(state.get(key), torch.Tensor):
                        self._update_and_maybe_create_winfos(state[key], grad)

    def _register_global_optimizer_hook(self) -> None:
        # Upstream's hooks clear ``_in_opt`` when any step ends; an optimizer that steps an
        # inner one (the fp32-master wrapper) must stay "in the step" until the outer one ends.
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        def pre(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
            self._opt_depth += 1
            self._in_opt = True

        def post(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
            self._track_optimizer_states(self._ref_class.OPT, optimizer)
            self._opt_depth -= 1
            self._in_opt = self._opt_depth > 0

        self._optimizer_hook_handles = (
            register_optimizer_step_pre_hook(pre),
            register_optimizer_step_post_hook(post),
        )

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        res = super().__torch_dispatch__(func, types, args, kwargs)  # type: ignore[misc]  # MemTracker's, next in the MRO
        if res is NotImplemented or not (self.count_flops or self.block_prefix):
            return res
        if active_fake_mode() is not self.entry_fake_mode:
            return res  # DTensor's shape propagation, not an op that runs
        if self.count_flops:
            formula = self.formulas.get(func._overloadpacket)
            if formula is not None:
                n = formula(*args, **(kwargs or {}), out_val=res)
                side = "backward" if self._mod_tracker.is_bw else "forward"
                for fqn in set(self._mod_tracker.parents):
                    row = self.flops.setdefault(fqn, {"forward": 0, "backward": 0})
                    row[side] += n
        if self.block_prefix:
            self._note_segment()
        return res

    def _note_segment(self) -> None:
        prefix = self.block_prefix or ""
        # The block itself, not a module inside it: in backward torch's ModTracker leaves a
        # module whose input is its output (peft's lora_dropout at p = 0, an nn.Identity) among
        # the parents until backward ends (its pop hook fires before its push), and picking the
        # first block-like name of that set gave a later block's stretch the ops of an earlier
        # one (LoRA with full checkpointing: block scaling missed, every block was traced).
        # Backward runs the blocks in reverse: the lowest block active is the one running.
        indices = [
            int(rest)
            for fqn in self._mod_tracker.parents
            if fqn.startswith(prefix) and (rest := fqn[len(prefix) :]).isdigit()
        ]
        role = None
        if indices:
            role = prefix + str(min(indices) if self._mod_tracker.is_bw else max(indices))
        if role is None:
            role = "after" if self._blocks_seen else "before"
        else:
            self._blocks_seen = True
        snap = self._curr_mem_snap
        total = sum(d["Total"] for d in snap.values())
        key = f"{self.phase}|{role}"
        best = self.segments.get(key)
        if best is None or best["Total"] < total:
            self.segments[key] = merge_snapshots(snap)

    def __enter__(self) -> Any:
        # The fake mode active at entry, recorded here on every torch (upstream records it
        # only from 2.12 on): ops under another fake mode are DTensor's shape propagation.
        self.entry_fake_mode = active_fake_mode()
        return super().__enter__()  # type: ignore[misc]  # MemTracker's, next in the MRO

    def begin_phase(self, phase: str) -> None:
        """Start a new stretch of the step: its own peak (and segment maxima)."""
        self.phase = phase
        self._blocks_seen = False
        reset_peak(self)
        if self.block_prefix:
            start = merge_snapshots(self.get_tracker_snapshot())
            start.setdefault("Total", 0)
            self.segments[f"{phase}|start"] = start


if TYPE_CHECKING:

    class StepTracker(_StepMixin, MemTracker):
        """What ``make_tracker`` returns: torch's (FSDP)MemTracker with ``_StepMixin``."""


def reset_peak(tracker: _StepMixin) -> None:
    """Start a new peak from what is allocated now (the tracker's own state, as on entry)."""
    snap = tracker.get_tracker_snapshot()
    tracker._peak_mem_snap = deepcopy(snap)
    tracker._peak_mem = {dev: dev_snap["Total"] for dev, dev_snap in snap.items()}


def flop_formulas(failures: dict[str, str]) -> dict[object, Callable[..., int]]:
    """torch's FLOP formulas, plus the CPU flash-attention kernels fake tensors run here, each
    safe (a failing formula counts 0 and is named in ``failures``; see ``_torch_compat``).

    torch counts SDPA only for its CUDA kernels; on the cpu device attention dispatches to
    ``_scaled_dot_product_flash_attention_for_cpu`` (and its backward), same arguments, same
    matmuls. Like torch's formula, causal masking is not discounted (PaLM's convention).
    """
    from torch.utils.flop_counter import flop_registry

    from profiling.models.losses import KERNEL_FLOPS  # Cut Cross-Entropy's kernels' matmuls

    registry = {**flop_registry, **cpu_flash_formulas(), **KERNEL_FLOPS}
    return safe_flop_formulas(failures, registry)


class _FastPeakMixin:
    """The same peak bookkeeping as ``MemTracker._update_peak_stats``, without its hot loop.

    Upstream walks every tracked module (a weak-key dictionary) on every op to find the active
    ones; on a 7B model that is most of the trace time. We index the module stats by name,
    rebuild the index when modules are added, and visit only the active parents.
    """

    _fast_index: dict[str, list[_ModMemStats]]
    _fast_index_len: int = -1
    # What this mixin uses of torch's MemTracker (private API), which it is mixed into.
    memory_tracking: WeakIdKeyDictionary  # module -> its _ModMemStats
    _mod_tracker: ModTracker
    _curr_mem_snap: dict[torch.device, dict[str, int]]
    _peak_mem: dict[torch.device, int]
    _peak_mem_snap: dict[torch.device, dict[str, int]]

    def _update_peak_stats(self, peak_state: _ModState) -> None:
        tracking = self.memory_tracking
        if len(tracking) != self._fast_index_len:
            self._fast_index = {}
            for stats in tracking.values():
                self._fast_index.setdefault(stats.mod_fqn, []).append(stats)
            self._fast_index_len = len(tracking)
        curr_snap = self._curr_mem_snap
        for fqn in self._mod_tracker.parents:
            for stats in self._fast_index.get(fqn, ()):
                if stats.mod_fqn != fqn or peak_state not in stats.snapshots:
                    continue
                for dev, dev_snap in curr_snap.items():
                    if stats.local_peak.get(dev, 0) < dev_snap["Total"]:
                        stats.local_peak[dev] = dev_snap["Total"]
                        stats.snapshots[peak_state][-1][dev] = deepcopy(dev_snap)
        for dev, dev_snap in curr_snap.items():
            if self._peak_mem.get(dev, 0) < dev_snap["Total"]:
                self._peak_mem[dev] = dev_snap["Total"]
                self._peak_mem_snap[dev] = deepcopy(dev_snap)


# The fast bookkeeping replays upstream's ``_update_peak_stats`` exactly as written in these
# torch versions (fingerprint of its syntax tree, comments and layout ignored). Any other
# version, or an upstream whose method changed, gets torch's tracker unchanged: slower, never
# different. Add a fingerprint only after ``test_fast_tracker_matches_upstream`` passes on it.
FAST_TRACKER_MIN_TORCH = (2, 5)
_KNOWN_PEAK_STATS_FINGERPRINTS = frozenset(
    # torch 2.11 and 2.13 (2.11 checked from its wheel: the same syntax tree)
    {"91cba7ae5e40d02bca77607ff1d7c560a2f008fac8f38c07d95fc59f305e09ee"}
)
_FAST_STATE_ATTRS = ("memory_tracking", "_curr_mem_snap", "_peak_mem", "_peak_mem_snap")


def _fingerprint(method: Callable[..., object]) -> str | None:
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):  # no source shipped (frozen / stripped installs)
        return None
    return hashlib.sha256(ast.dump(ast.parse(source)).encode()).hexdigest()


@functools.cache
def fast_tracker_supported() -> bool:
    """True when this torch's MemTracker is the one ``_FastPeakMixin`` was checked against."""
    if torch_version() < FAST_TRACKER_MIN_TORCH:
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


def is_fast_tracker(tracker: object) -> bool:
    return isinstance(tracker, _FastPeakMixin)


def make_tracker(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: tuple[object, ...],
    mesh: DeviceMesh | None,
    fast: bool = True,
) -> StepTracker:
    """Torch's tracker, with the fast peak bookkeeping when ``fast`` and this torch allows it."""
    fast = fast and fast_tracker_supported()
    if mesh is not None:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
        from torch.distributed._tools.mem_tracker import MemTracker

        # An FSDP-specific override would be shadowed by the mixin: keep upstream's then.
        fast = fast and FSDPMemTracker._update_peak_stats is MemTracker._update_peak_stats
        bases = (
            (_FastPeakMixin, _StepMixin, FSDPMemTracker) if fast else (_StepMixin, FSDPMemTracker)
        )
        tracker = type("_StepFSDPMemTracker", bases, {})(model, optimizer)
        tracker.track_inputs(inputs)
    else:
        from torch.distributed._tools.mem_tracker import MemTracker

        bases = (_FastPeakMixin, _StepMixin, MemTracker) if fast else (_StepMixin, MemTracker)
        tracker = type("_StepMemTracker", bases, {})()
        tracker.track_external(
            model, optimizer, *[t for t in inputs if isinstance(t, torch.Tensor)]
        )
    tracker.flops = {}
    tracker.segments = {}
    tracker.flop_failures = {}
    tracker.formulas = flop_formulas(tracker.flop_failures)
    return tracker


class FlopCount(BaseModel):
    """FLOPs of the steady-state step's forward and backward (matmuls, attention, convolutions;
    elementwise ops and the optimizer step are not counted, as in torch's FlopCounterMode)."""

    total: int
    forward: int
    backward: int
    by_module: dict[str, dict[str, int]]  # fqn -> {"forward": n, "backward": n}


def flop_count(counts: dict[str, dict[str, int]], depth: int) -> FlopCount:
    total = counts.get("Global", {"forward": 0, "backward": 0})
    return FlopCount(
        total=total["forward"] + total["backward"],
        forward=total["forward"],
        backward=total["backward"],
        by_module={
            fqn: dict(row)
            for fqn, row in counts.items()
            if fqn != "Global" and fqn.count(".") <= depth
        },
    )
