"""FSDP's accumulation without gradient sync, traced: the micro-batches before the last.

``accumulate_unsharded`` N runs each optimizer step's first N − 1 micro-batches with FSDP2's
``set_requires_gradient_sync(False)`` — what FSDP1's ``no_sync()`` does to memory too: every
parameter's unsharded gradient stays on the rank (``FSDPParam._unsharded_param.grad``; with an
fp32 reduce dtype, ``unsharded_accumulated_grad``) while the parameters are resharded after
backward as usual — then the last micro-batch with sync on, which adds its gradients and
reduce-scatters them, then the optimizer step.

Only two micro-batches before the last are ever traced: the first starts without gradients, the
second with every unsharded gradient held, and every later one repeats the second to the byte.
Each phase's peak is the highest of the micro-batches'; FLOPs are one micro-batch's (the step
time is per micro-batch, as without accumulation); the module rows are the last micro-batch's
(torch's FSDPMemTracker tracks one forward per module at a time). Imports torch: import it lazily.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from profiling.trace.build import _loss_of
from profiling.trace.lowest_block import backward_peak
from profiling.trace.tracker import merge_snapshots

if TYPE_CHECKING:
    from torch import nn

    from profiling.trace.tracker import StepTracker

Snap = dict[str, int]
FSDP1_NOT_TRACED = (
    "--fsdp-flat: traced as FSDP2 (one parameter per tensor); FSDP1's flat gradient of the root "
    "(its views' gradients concatenated while it is gathered, at backward's end) is the "
    "estimate's alone"
)
RunStep = Callable[..., tuple[dict[str, Snap], dict[str, Snap]]]


def accumulating(micro_batches: int, run_step: RunStep) -> RunStep:
    """``run_step`` (the step's last micro-batch and the optimizer step) preceded by the
    micro-batches that keep unsharded gradients; each phase's peak the highest of them all."""

    def run(
        tracker: StepTracker,
        model: nn.Module,
        inputs: tuple[object, ...],
        optimizer: object,
        autocast: Callable[[], contextlib.AbstractContextManager[object]],
        say: Callable[[str], None],
        label: str,
    ) -> tuple[dict[str, Snap], dict[str, Snap]]:
        early = _unsynced(tracker, model, inputs, autocast, say, label, min(micro_batches - 1, 2))
        phases, peaks = run_step(tracker, model, inputs, optimizer, autocast, say, label)
        for phase, snap in early.items():
            if snap.get("Total", 0) > peaks[phase].get("Total", 0):
                peaks[phase] = snap
        return phases, peaks

    return run


def _unsynced(
    tracker: StepTracker,
    model: Any,
    inputs: tuple[object, ...],
    autocast: Callable[[], contextlib.AbstractContextManager[object]],
    say: Callable[[str], None],
    label: str,
    count: int,
) -> dict[str, Snap]:
    """``count`` forward and backward passes without gradient sync; each phase's highest peak."""
    peaks: dict[str, Snap] = {}
    flops, tracker.count_flops = tracker.count_flops, False  # FLOPs: one micro-batch's
    model.set_requires_gradient_sync(False)  # the root's FSDPModule: every module under it
    try:
        for i in range(count):
            for phase in ("forward", "backward"):
                say(f"{label}: micro-batch {i + 1} without gradient sync, {phase}")
                if phase == "forward":  # the tracker's module rows: one forward's at a time
                    tracker.reset_mod_stats()
                tracker.begin_phase(f"{label}/{phase}")
                if phase == "forward":
                    with autocast():
                        loss = _loss_of(model(*inputs))
                else:
                    loss.backward()  # pyright: ignore[reportPossiblyUnboundVariable]
                    del loss
                snap = merge_snapshots(tracker.get_tracker_snapshot("peak"))
                if phase == "backward":  # its two windows' higher where layer-scaled
                    snap = backward_peak(tracker)
                if snap.get("Total", 0) > peaks.get(phase, {}).get("Total", -1):
                    peaks[phase] = snap
    finally:
        model.set_requires_gradient_sync(True)
        tracker.reset_mod_stats()  # the module rows are the last micro-batch's
        tracker.count_flops = flops
    return peaks
