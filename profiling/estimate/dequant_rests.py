"""QLoRA's dequantized weights cut into rests the caching allocator cannot hand back: the
reserve's (and the need's) term for bitsandbytes' 16-bit transients, in closed form.

bitsandbytes' ``MatMul4Bit.forward`` (bitsandbytes/autograd/_functions.py) computes
``torch.nn.functional.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t())``: each
4-bit linear's whole weight is written in 16 bits (``dequantize_4bit``, functional.py), used
once and freed (backward dequantizes it again). With the blocks keeping what they save for
backward, what is made next is kept: by the caching allocator's rules
(c10/cuda/CUDACachingAllocator.cpp; ``profiling.estimate.allocator`` models them) —

- the weight, ``D`` bytes ≥ ``kMinLargeAlloc`` (10 MiB), takes a segment of its own rounded
  up to ``kRoundLarge`` (2 MiB) when no cached block holds it (``get_allocation_size``);
- freed, that block is cached whole, and the next request of the large pool takes the smallest
  cached block that holds it (``get_free_block``: best fit), splitting the rest off when it
  is over ``kSmallSize`` (1 MiB; ``should_split``) — a kept activation of the block carved out
  of the freed weight pins its segment (``release_cached_blocks`` hands back only segments
  with no live block, ``release_blocks``), and the rest stays free inside it;
- the rest is carved again by the next kept activation that fits it, until it is smaller
  than the smallest the block keeps; so the next weight of ``D`` finds no block and takes a
  segment of its own, and the rest is left behind in every block.

So each 4-bit linear of each block leaves at most one rest ``D − x`` in a segment a live block
holds, where ``x`` is a sum of the sizes of the activations its block keeps (the lattice of
those sizes, below ``D``) and ``D − x`` is smaller than the least of them (else it would have
been carved): the largest such rest is the bound (``largest_rest``), times the block's 4-bit
linears, times the blocks. A GPU near full cannot hand those rests back (their segments hold
live activations), so the need carries the term as the reserve does.

Under full checkpointing a block's forward frees what it made (the rests merge back), and only
the block recomputed going back keeps its tensors: one block's rests.

The 4-bit weights themselves (``weight_rests``), made once with the model, hold segments
beyond their bytes by the same rules: a packed weight of 1-10 MiB shares 20 MiB segments
(``kLargeBuffer``) with others, ⌊20 MiB / w⌋ to one, and the rest fits none of them (llama-7b's
8 MiB attention weights: 4 MiB in each of 64 segments); a larger one's segment is rounded up to
2 MiB (``kRoundLarge``).

llama-7b QLoRA r16 bf16, 6 × 512 (D61): the replay needs 20.24 GB where the bound without the
terms said 18.31 (0.905): its 86 MiB MLP weights are carved by the 64.5 MiB activations after
them (rests of 21.5 MiB, under the 24 MiB s·b·h·2 kept beside them) and its 32 MiB attention
weights by 24 MiB ones (rests of 8 MiB): 3.24 GB, and the weights' segments 318.8 MB; 1.080 of
the replay with both. Fully checkpointed 0.967 -> 1.028. Checked against the replays of
batches 1-8 at 512 tokens, 256 and 1,024 tokens, autocast, full checkpointing
(docs/profiling.md's counters section has the table).

No torch here.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from profiling.estimate.allocator import MIN_BLOCK, SMALL_SIZE, round_size, segment_size

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Dims

NAME = "bitsandbytes' dequantized weights' rests in segments a kept activation holds"
WEIGHTS = "the 4-bit weights' segments beyond them"


def largest_rest(block: int, kept: list[int]) -> int:
    """The largest ``block − x`` under the least of ``kept`` with ``x`` a sum of ``kept`` sizes
    (each rounded to 512 B, as the allocator rounds them): what can stay free in a freed block
    that kept activations were carved out of until none fits; 0 where none fits at all."""
    units = sorted({round_size(k) // MIN_BLOCK for k in kept})
    top = block // MIN_BLOCK
    if not units or top < units[0]:
        return 0  # nothing kept is carved from it: freed, the segment holds no live block
    mask = (1 << (top + 1)) - 1
    reach = 1  # bit x: x units are a sum of kept sizes
    for k in units:  # every multiple of k added to every sum so far: j·k by j's binary digits
        step = k
        while step <= top:
            reach |= (reach << step) & mask
            step *= 2
    low = top - units[0] + 1  # x in (top − least, top]: a rest smaller than the least
    window = (reach >> low) & ((1 << units[0]) - 1)
    x = low + (window & -window).bit_length() - 1  # the least such x: the largest rest
    return (top - x) * MIN_BLOCK


def kept_sizes(cfg: TrainingConfig, d: Dims) -> list[int]:
    """The large-pool sizes a block keeps for backward, any of which can be carved out of a freed
    16-bit weight: s·b × (h, the key/value width k, f, and fused q/k/v's h + 2k) in the
    activations' dtype (fp32 under autocast, bitsandbytes returning its input's dtype, beside
    autocast's 16-bit copies), the adapters' own copies of their inputs and lora_dropout's
    masks. A size left out could only make the bound smaller where it is the least."""
    from profiling.estimate.activations import Bytes
    from profiling.estimate.lora_bytes import adapter_bytes, mask_bytes, own_copies

    e = Bytes.of(cfg.precision)
    tokens = d.s * d.b
    widths = (d.h, d.k, d.f, d.h + 2 * d.k)
    dtypes = {4 if e.amp else e.c} | ({2} if e.amp else set())
    sizes = {tokens * w * c for w in widths for c in dtypes}
    inputs = (d.h, d.f) if "down" in cfg.lora_targets else (d.h,)
    if own_copies(cfg, e):
        sizes |= {tokens * w * adapter_bytes(cfg) for w in inputs}
    if cfg.lora_dropout:
        sizes |= {tokens * w * mask_bytes(cfg) for w in inputs}
    return sorted(s for s in sizes if s > SMALL_SIZE)


def applies(cfg: TrainingConfig) -> bool:
    """bitsandbytes' 4-bit base (not torchao's NF4) on one GPU's layout (no tensor, context or
    pipeline parallelism, no sharding: the layout checked)."""
    if not cfg.qlora or cfg.torchao_nf4:
        return False
    return cfg.tp == 1 and cfg.cp == 1 and cfg.pp == 1 and not cfg.sharded


def blocks_carved(cfg: TrainingConfig, layers: int) -> int:
    """How many blocks' weights are carved at once: every block where the blocks keep what they
    save; under full checkpointing the one block recomputed going back (it keeps its saved
    tensors until its backward; a checkpointed forward frees them, and the rests merge back)."""
    from profiling.estimate.selective import blocks_keep_saved

    full = not blocks_keep_saved(cfg) and (cfg.checkpoint_every or 1) <= 1
    return 1 if full else layers


def weight_rests(cfg: TrainingConfig) -> tuple[int, str]:
    """(bytes, how): what the 4-bit weights' own segments hold beyond them, by the allocator's
    segment sizes — a packed weight of 1-10 MiB shares 20 MiB segments (``kLargeBuffer``) with
    others of its size, ⌊20 MiB / w⌋ to a segment (a smaller rest fits no other), a larger one
    takes a segment rounded up to 2 MiB (``kRoundLarge``); made once, with the model, so they
    hold whatever the step does. (0, "") where it does not apply."""
    from profiling.estimate.allocator import LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE
    from profiling.estimate.shape import shape_of
    from profiling.units import fmt_bytes

    shape = shape_of(cfg)
    numels, layers = shape.get("block_linear_numels") or [], int(shape.get("layers") or 0)
    if not applies(cfg) or not numels or not layers:
        return 0, ""
    total, steps = 0, []
    for numel, count in sorted(Counter(int(n) for n in numels).items()):
        w, n = round_size((numel + 1) // 2), count * layers  # two 4-bit codes a byte
        if w <= SMALL_SIZE:
            continue
        if w < MIN_LARGE_ALLOC:
            each = LARGE_BUFFER // w
            rest = -(-n // each) * LARGE_BUFFER - n * w
            steps.append(f"{n} × {fmt_bytes(w)}, {each} to a 20 MiB segment")
        else:
            rest = n * (-(-w // ROUND_LARGE) * ROUND_LARGE - w)
            steps.append(f"{n} × {fmt_bytes(w)} in segments rounded up to 2 MiB")
        total += rest
    return total, "; ".join(steps)


def dequant_rests(cfg: TrainingConfig) -> tuple[int, str]:
    """(bytes, how): the rests every block's 4-bit linears leave, step by step; (0, "") where
    it does not apply."""
    from profiling.estimate.activations import Bytes, dims_of
    from profiling.estimate.shape import shape_of
    from profiling.units import fmt_bytes

    if not applies(cfg):
        return 0, ""
    shape = shape_of(cfg)
    d = dims_of(shape, cfg.seq_or_default(), cfg.batch)
    numels = shape.get("block_linear_numels") or []
    if d is None or not numels:
        return 0, ""
    kept = kept_sizes(cfg, d)
    if not kept:
        return 0, ""
    c = Bytes.of(cfg.precision).c  # the weight dequantized to the compute dtype
    per_block, steps = 0, []
    for numel, count in sorted(Counter(int(n) for n in numels).items()):
        weight = numel * c
        rest = largest_rest(segment_size(round_size(weight)), kept) if weight > SMALL_SIZE else 0
        per_block += rest * count
        steps.append(f"{count} × {fmt_bytes(weight)} → {fmt_bytes(rest)}")
    blocks = blocks_carved(cfg, d.L)
    total = per_block * blocks
    which = ", the one recomputed going back" if blocks < d.L else "s"
    how = (f"each 4-bit linear's 16-bit weight, freed after its matmul, carved by the "
           f"activations the block keeps to a rest under the least of them, "
           f"{fmt_bytes(kept[0])}: {'; '.join(steps)}; {fmt_bytes(per_block)} a block × "
           f"{blocks} block{which}")  # fmt: skip
    return total, how


__all__ = [
    "NAME",
    "WEIGHTS",
    "applies",
    "blocks_carved",
    "dequant_rests",
    "kept_sizes",
    "largest_rest",
    "weight_rests",
]
