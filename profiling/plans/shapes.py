"""A plan's element sizes, its stage's tensors as tensor parallelism leaves them and FSDP's
padded shards (``profiling.plans.closed_form`` and ``profiling.plans.fsdp_moments`` share them).

No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage

# the loss (torchtitan's cross-entropy over fp32 logits) and backward's seed for it (autograd's
# ones_like), fp32 scalars the loop holds through the whole backward (the trace's live tensors:
# aten.nll_loss_forward's and aten.ones_like's 4 B each beside the first block's gather); a
# moment after the head's backward that frees every tensor the head saved (its 8 B of scalars:
# closed_form.head_activations, the loss and nll_loss's total weight) holds them again
LOSS_SCALARS = 8


@dataclass
class Sizes:
    """Element sizes of a plan's step: the residual stream and matmul inputs (``c``), the
    sharded parameters (``shard``), the gathered ones and their gradients (``gathered``)."""

    c: int
    shard: int
    gathered: int
    master: int  # the optimizer's fp32 master copy per parameter (mixed without FSDP)

    @classmethod
    def of(cls, cfg: TrainingConfig) -> Sizes:
        c = 4 if cfg.precision == "fp32" else 2
        if cfg.fsdp:
            shard = 2 if cfg.precision == "bf16" else 4
            return cls(c=c, shard=shard, gathered=c, master=0)
        return cls(c=c, shard=c, gathered=c, master=4 if cfg.precision == "mixed" else 0)


def stage_tensors(w: WorkloadConfig, stage: Stage, layers: int, t: int) -> list[tuple[int, int]]:
    """(dim 0, the rest) of each parameter of the stage, as tensor parallelism leaves it."""
    h, hd, f = w.hidden, w.head_dim, w.ffn
    q, kv = w.heads * hd, w.n_kv_heads * hd
    block = [(q // t, h), (kv // t, h), (kv // t, h), (h, q // t),
             (f // t, h), (h, f // t), (f // t, h), (h, 1), (h, 1)]  # fmt: skip
    out = block * layers
    if stage.embedding:
        out.append((w.vocab // t, h))
    if stage.head:
        out += [(h, 1), (w.vocab // t, h)]
    return out


def sdpa_kv(w: WorkloadConfig, t: int) -> int:
    """The local width (elements per token) of the keys and values SDPA receives and keeps
    under tensor parallelism over ``t`` ranks: repeated to every local head (torchtitan's
    ``repeat_kv``, a copy), but a rank's one key/value head (kv = t, or multi-query) stays
    un-repeated: the expand and the reshape of one head are a view."""
    if w.n_kv_heads // t == 1:
        return 2 * w.head_dim
    return 2 * w.heads * w.head_dim // t


def _shard(dim0: int, rest: int, n: int) -> int:
    """Elements of one FSDP shard: dim 0 split in n, padded to equal pieces."""
    return -(-dim0 // n) * rest


__all__ = ["Sizes", "_shard", "sdpa_kv", "stage_tensors"]
