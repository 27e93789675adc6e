"""The estimate under ``--compile``: what each block keeps is what torch.compile's partitioner
keeps, obtained from the partitioner itself, not from a formula.

``profiling.trace.compiled_estimate.block_saved`` builds two blocks of the model as the trace builds
them, on fake tensors, runs AOTAutograd with Inductor's partitioner
(``min_cut_rematerialization_partition`` after Inductor's joint-graph passes) on each and sums
the storages its forward graph returns as saved for backward: the first block's and the
others'. That takes a second or two the first time for a shape (torch imported, two blocks
traced), then nothing (cached per model, sequence, batch, precision and adapters). The rest of
the estimate is unchanged: the blocks' inputs under full checkpointing, the final norm, the
loss, RoPE's tables, the LM head's autocast copy (the blocks' weight copies, when the
partitioner keeps them, are in its count: the compiled graph casts them itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, Term, head_copy_only
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_SOURCE = "AOTAutograd + Inductor's min-cut partitioner on fake tensors"


def per_layer(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """One term: the bytes a block other than the first keeps (the partitioner's count)."""
    from profiling.trace.compiled_estimate import block_saved

    _, rest = block_saved(cfg)
    return [
        Term(
            f"compiled block's saved tensors ({rest.tensors}, by {_SOURCE})",
            rest.bytes,
            "Σ saved storages",
            f"{rest.bytes:,}",
        )
    ]


def once(
    terms: list[Term], d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig
) -> list[Term]:
    """Once per model under --compile: the first block's difference from the others (none
    under full checkpointing, where no block keeps what it saves), and of autocast's weight
    copies only the LM head's (a compiled block casts its own weights)."""
    if not cfg.compile:
        return terms
    from profiling.trace.compiled_estimate import block_saved

    out = [head_copy_only(t, shape, "compiled") for t in terms] if e.amp else list(terms)
    if cfg.checkpointing == "full":  # each block keeps its input alone: the partitions'
        return out  # difference is the recomputed block's (estimate.recomputed)
    first, rest = block_saved(cfg)
    if first.bytes != rest.bytes:
        diff = first.bytes - rest.bytes
        out.append(
            Term(
                "the first compiled block's saved tensors beside the others' (its input "
                "needs no gradient, or its partition differs)",
                diff,
                "Σ saved (first) − Σ saved (others)",
                f"{fmt_bytes(first.bytes)} − {fmt_bytes(rest.bytes)}",
            )
        )
    return out
