"""DeepSpeed-Ulysses around torchtitan's attention: sequence-sharded outside it, head-sharded
inside it, an all-to-all each way.

DeepSpeed's ``DistributedAttention`` (``deepspeed/sequence/layer.py``) wraps the local
attention: each of the N ranks of a sequence-parallel group holds 1/N of the sequence with every
head; ``single_all_to_all`` re-shards q, k and v to the whole sequence for 1/N of the heads
(one contiguous copy to send, torch's ``all_to_all_single`` into a buffer of the same size, the
result a view of it), the local attention runs, and the inverse all-to-all gives each rank its
tokens back with every head. Here q and k are re-sharded after the rotary embedding (as
Megatron-DeepSpeed applies it before its core attention) and the keys and values before they
are repeated to every head (as DeepSpeed's Hugging Face front, ``UlyssesSPAttentionHF``, does:
the kernel's grouped-query repeat comes after the all-to-all). With fewer key/value heads than
ranks (``N`` a multiple of them: MQA, and GQA past its groups) ``UlyssesSPAttentionHF``
replicates each key/value head ``N / kv`` times before the all-to-all
(``repeat_interleave(kv_replication_factor, dim=2)``, deepspeed/runtime/sequence_parallel/
ulysses_sp.py), so each rank receives one, and sets the kernel's grouped-query repeat to its
own q heads per key/value head (``num_key_value_groups``); other counts it refuses, and so
does a plan here.

The all-to-all is torch's functional ``all_to_all_single_autograd`` on the plan's fake process
group: its buffers have the real shapes, and its backward is the inverse all-to-all of the
gradients. The rotary table is the local chunk's (the same bytes as the rank's own positions).

Imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from profiling.plans.titan import Transformer


def _all_to_all(send: torch.Tensor, group: Any) -> torch.Tensor:
    from torch.distributed._functional_collectives import all_to_all_single_autograd

    return all_to_all_single_autograd(send, None, None, group)  # pyright: ignore[reportArgumentType]  # torch's list-or-None split sizes


class Ulysses:
    """The two all-to-alls of one sequence-parallel group of ``n`` ranks."""

    def __init__(self, group: Any, n: int) -> None:
        self.group, self.n = group, n

    def to_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, s/N, H, d) -> (b, s, H/N, d): rank j sends its tokens of head group j."""
        b, s, h, d = x.shape
        n = self.n
        send = x.reshape(b, s, n, h // n, d).permute(2, 0, 1, 3, 4).contiguous()
        recv = _all_to_all(send, self.group)  # (n: the senders' chunks of the sequence, …)
        return recv.permute(1, 0, 2, 3, 4).reshape(b, n * s, h // n, d)

    def kv_to_heads(self, x: torch.Tensor) -> torch.Tensor:
        """Keys or values to heads; fewer of them than ranks are replicated first, each
        ``N / kv`` times in place (DeepSpeed's ``kv_replication_factor``): rank j receives the
        key/value head of its q heads' group."""
        kv = x.shape[2]
        if kv < self.n:
            x = x.repeat_interleave(self.n // kv, dim=2)
        return self.to_heads(x)

    def to_sequence(self, x: torch.Tensor) -> torch.Tensor:
        """(b, s, H/N, d) -> (b, s/N, H, d): rank j sends its heads of sequence chunk j."""
        b, s, h, d = x.shape
        n = self.n
        send = x.reshape(b, n, s // n, h, d).transpose(0, 1).contiguous()
        recv = _all_to_all(send, self.group)  # (n: the senders' head groups, …)
        return recv.permute(1, 2, 0, 3, 4).reshape(b, s // n, n * h, d)


def apply_ulysses(model: Transformer, group: Any, n: int) -> None:
    """Every block's attention re-shards around its kernel over ``group`` (``n`` ranks)."""
    for block in model.layers.values():
        block.attention.ulysses = Ulysses(group, n)  # type: ignore[union-attr]  # titan's blocks


__all__ = ["Ulysses", "apply_ulysses"]
