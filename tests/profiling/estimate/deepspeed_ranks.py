"""DeepSpeed 0.19.6's (edaa7221) ZeRO-2 partitions over a model's own tensors, for the tests
that check the estimate's against them."""

from __future__ import annotations


def kept_whole(numels: list[int], n: int) -> int:
    """DeepSpeed's get_partition_info over each rank: the whole tensors starting in its
    partition, and the one straddling its start; the largest rank's sum."""
    total = sum(numels)
    part = -(-total // (2 * n)) * 2
    best = 0
    for r in range(n):
        s, e, at, size = r * part, (r + 1) * part, 0, 0
        for x in numels:
            if s <= at < e or at < s < at + x:
                size += x
            at += x
        best = max(best, size)
    return best
