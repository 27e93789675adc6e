"""The sizes the stacks' losses chunk by (``profiling.models.losses`` runs them, the estimate's
tapes count them). No torch here."""

from __future__ import annotations

import math

LITGPT_CHUNK = 128  # LitGPT's finetune scripts: lm_head_chunk_size and chunked_cross_entropy's


def liger_chunking(tokens: int, hidden: int, vocab: int) -> tuple[int, int]:
    """Liger's chunk of tokens and chunk count (fused_linear_cross_entropy_forward):
    ``inc_factor = cdiv(V, H)``, ``chunk_size = next_power_of_2(cdiv(BT, inc_factor))``."""
    inc = -(-vocab // hidden)
    size = 1 << max(0, math.ceil(math.log2(-(-tokens // inc))))
    return size, -(-tokens // size)


def tensor_split(n: int, parts: int) -> list[int]:
    """``torch.tensor_split(n, parts)``'s sizes: the first ``n % parts`` one longer."""
    q, extra = divmod(n, parts)
    return [q + 1 if i < extra else q for i in range(parts)]


def split(n: int, size: int) -> list[int]:
    """``torch.split(size)``'s sizes: ``size`` each, the last what is left."""
    return [min(size, n - i) for i in range(0, n, size)]


__all__ = ["LITGPT_CHUNK", "liger_chunking", "split", "tensor_split"]
