"""A backward's peak split where the model's lowest block's backward starts, for the layer-scaled
trace (``profiling.trace.scaling.extrapolate_layers``).

A phase's peak is the highest of moments each affine in the layer count, so a line through
samples of 1-3 layers holds only while the moment that leads them still leads at the model's
own count. In backward two moments grow at different rates: the head's (every layer's saved
activations beside the logits' gradients) and the lowest block's (every gradient made above
it, those layers' saved tensors freed). Where a layer's gradients outweigh what it saves (fp32
gradients, few tokens, checkpointed blocks) the second overtakes the first past the samples:
transformers' Llama, fp32, full checkpointing, hidden 128, vocabulary 2,000, 512 tokens, read
5,076,496 B below its 12-layer trace from 1-3 layers. So the samples keep the peak from the
lowest block's backward on apart (a gradient hook on that block's output), the scaling fits it
too and traces every layer when it would lead where the fitted peak did not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from profiling.trace.tracker import merge_snapshots, reset_peak

if TYPE_CHECKING:
    from profiling.trace.tracker import StepTracker

UPPER, LOWEST = "|upper", "|lowest"  # segment keys: the phase's label + these


def watch_lowest_block(tracker: StepTracker, model: nn.Module) -> None:
    """At the gradient of the lowest block's output (its backward starts) the phase's peak so
    far is kept as ``{phase}|upper`` and a new one begun (read back by :func:`backward_peak`)."""
    from profiling.trace.build import _block_list

    blocks = _block_list(model)
    if blocks is None:
        return

    def split(grad: torch.Tensor) -> None:
        key = tracker.phase + UPPER
        if tracker.phase.endswith("/backward") and key not in tracker.segments:
            tracker.segments[key] = merge_snapshots(tracker.get_tracker_snapshot("peak"))
            reset_peak(tracker)

    def hooked(module: nn.Module, args: Any, out: Any) -> None:
        out = out[0] if isinstance(out, tuple | list) and out else out
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(split)

    blocks[0].register_forward_hook(hooked)


def backward_peak(tracker: StepTracker) -> dict[str, int]:
    """The backward's peak: the higher of its two windows where it was split (the earlier on a
    tie, as the tracker's own running maximum keeps), the later kept as ``{phase}|lowest``."""
    peak = merge_snapshots(tracker.get_tracker_snapshot("peak"))
    upper = tracker.segments.pop(tracker.phase + UPPER, None)
    if upper is None:
        return peak
    kept = tracker.segments.get(tracker.phase + LOWEST)  # micro-batches' backwards: the highest
    if kept is None or kept.get("Total", 0) < peak.get("Total", 0):
        tracker.segments[tracker.phase + LOWEST] = peak
    return peak if peak.get("Total", 0) > upper.get("Total", 0) else upper


__all__ = ["LOWEST", "backward_peak", "watch_lowest_block"]
