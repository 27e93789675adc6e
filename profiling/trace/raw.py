"""What one traced loop saw, before it becomes a ``TraceResult`` (``profiling.trace.step``),
and every number it reports by name, which the block- and layer-scaled traces extrapolate."""

from __future__ import annotations

import dataclasses
from typing import Any

from profiling.trace.allocations import Replay
from profiling.trace.tracker import ModuleMemory

PHASES = ("forward", "backward", "optimizer_step")


def _highest(peaks: dict[str, dict[str, int]]) -> str:
    """The phase whose peak is highest (the earliest on a tie, as a running maximum keeps)."""
    return max(PHASES, key=lambda ph: (int(peaks[ph].get("Total", 0)), -PHASES.index(ph)))


@dataclasses.dataclass
class _Raw:
    """What one traced loop saw, before it becomes a :class:`TraceResult`."""

    info: dict[str, Any]
    params: int
    root: str  # the model's fqn in the trackers (its class name)
    block_prefix: str | None  # "Llama.layers." — the repeated blocks, if any
    peaks: dict[str, dict[str, dict[str, int]]]  # step label -> phase -> peak snapshot
    phases: dict[str, dict[str, int]]
    after: dict[str, int]
    modules: dict[str, ModuleMemory]
    flops: dict[str, dict[str, int]]
    segments: dict[str, dict[str, int]]
    notes: list[str]
    replay: Replay | None = None  # the allocations replayed through the caching allocator
    paged: int = 0  # a paged optimizer's managed memory, outside the allocator (trace.bnb)


FIRST, STEADY = "first step", "steady-state step"


def _named(raw: _Raw, depth: int, peaks: bool = False) -> dict[str, dict[str, int]]:
    """Every number a traced loop reports, by name (the block-scaled traces extrapolate them);
    ``peaks``: each phase's peak too (the block-scaled trace finds them from the stretches).

    FLOPs only down to ``depth``, the rows ``flop_count`` reports: torch's ModTracker keeps a
    module among the parents after a checkpointed block's recomputation, so the FLOPs of the
    matmuls that follow land on a leaf that ran none (a LoRA adapter's ``lora_dropout``), in some
    blocks of some samples only — a row no one reads made block scaling miss and trace every
    block (llama-7b LoRA with full checkpointing, 256 tokens: 41 s)."""
    named: dict[str, dict[str, int]] = {"params": {"n": raw.params}, "after": raw.after}
    named["paged"] = {"n": raw.paged}
    named.update({f"phase|{k}": v for k, v in raw.phases.items()})
    named.update({f"module|{k}": v.model_dump() for k, v in raw.modules.items()})
    named.update({f"flops|{k}": v for k, v in raw.flops.items() if k.count(".") <= depth})
    named.update({f"segment|{k}": v for k, v in raw.segments.items()})
    for label, by_phase in raw.peaks.items() if peaks else ():
        named.update({f"peak|{label}|{ph}": snap for ph, snap in by_phase.items()})
    return named


__all__ = ["FIRST", "PHASES", "STEADY", "_Raw", "_highest", "_named"]
