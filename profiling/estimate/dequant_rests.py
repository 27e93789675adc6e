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

A weight is pinned with a rest only once all of it but the rest is carved by live tensors, so
the rests are no more than the bytes the step keeps can carve (``pinned``, ``carved_bytes``):
at few tokens a block keeps too little to carve each of its weights (llama-7b 1 × 512: 2.16 GB
kept carve 70 of the 224 weights down to their rests; the bound was 1.162 of the replay, 1.046
now with the weights' rests below carved too).

The 4-bit weights themselves (``weight_rests``), made once with the model, hold segments
beyond their bytes by the same rules: a packed weight of 1-10 MiB shares 20 MiB segments
(``kLargeBuffer``) with others, ⌊20 MiB / w⌋ to one, and the rest fits none of them (llama-7b's
8 MiB attention weights: 4 MiB in each of 64 segments); a larger one's segment is rounded up to
2 MiB (``kRoundLarge``). A rest is the best fit (``get_free_block``: the smallest free block
that holds a request) of the LoRA adapters made after the weights (Llama 3.1 8B r32's 1.75 MiB
gate/up B and down A, two to each 4 MiB rest beside its 8 MiB q and o) and, where every block
keeps its tensors, of those (llama-7b's 4 MiB rests at 512 tokens, s·b·h·2 4 MiB).

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


def weight_segments(cfg: TrainingConfig) -> list[tuple[int, int, str]]:
    """``(rest, segments, how)`` for each size of packed 4-bit weight, by the allocator's segment
    sizes — a packed weight of 1-10 MiB shares 20 MiB segments (``kLargeBuffer``) with others of
    its size, ⌊20 MiB / w⌋ to a segment (a smaller rest fits no other), a larger one takes a
    segment rounded up to 2 MiB (``kRoundLarge``); made once, with the model. [] where it does
    not apply."""
    from profiling.estimate.allocator import LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE
    from profiling.estimate.shape import shape_of
    from profiling.units import fmt_bytes

    shape = shape_of(cfg)
    numels, layers = shape.get("block_linear_numels") or [], int(shape.get("layers") or 0)
    if not applies(cfg) or not numels or not layers:
        return []
    kinds = []
    for numel, count in sorted(Counter(int(n) for n in numels).items()):
        w, n = round_size((numel + 1) // 2), count * layers  # two 4-bit codes a byte
        if w <= SMALL_SIZE:
            continue
        if w < MIN_LARGE_ALLOC:
            each = LARGE_BUFFER // w
            how = f"{n} × {fmt_bytes(w)}, {each} to a 20 MiB segment"
            kinds.append((LARGE_BUFFER - each * w, n // each, how))
            if n % each:  # the last segment, partly filled
                kinds.append((LARGE_BUFFER - n % each * w, 1, f"the last of them with {n % each}"))
        else:
            kinds.append((-(-w // ROUND_LARGE) * ROUND_LARGE - w, n,
                          f"{n} × {fmt_bytes(w)} in segments rounded up to 2 MiB"))  # fmt: skip
    return kinds


def adapter_sizes(cfg: TrainingConfig, d: Dims) -> list[int]:
    """The LoRA adapters of every block in the large pool, largest first: A (r × its linear's
    input) and B (output × r) in the adapters' dtype, made once, after the 4-bit weights
    (peft wraps the quantized model), and held for good."""
    from profiling.estimate.lora import block_targets
    from profiling.estimate.lora_bytes import adapter_bytes

    if cfg.lora_rank is None:
        return []
    q = d.a * d.hd
    widths = {"q": (d.h, q), "k": (d.h, d.k), "v": (d.h, d.k), "o": (q, d.h),
              "gate": (d.h, d.f), "up": (d.h, d.f), "down": (d.f, d.h)}  # fmt: skip
    each = adapter_bytes(cfg) * cfg.lora_rank
    sizes = [round_size(w * each) for t in block_targets(cfg) for w in widths.get(t, ())]
    return sorted((n for n in sizes if n > SMALL_SIZE), reverse=True) * d.L


def _fill(rest: int, adapters: list[int]) -> int:
    """``rest`` less the adapters it is the best fit of, largest first (taken from the list)."""
    i = 0
    while i < len(adapters) and rest >= adapters[-1]:
        if adapters[i] <= rest:
            rest -= adapters.pop(i)
        else:
            i += 1
    return rest


def weight_rests(cfg: TrainingConfig) -> tuple[int, str]:
    """(bytes, how): what the 4-bit weights' own segments hold beyond them
    (:func:`weight_segments`): made once, with the model, so they hold whatever the step does —
    less what is carved out of them, each rest the best fit (``get_free_block``: the smallest
    free block that holds a request) of the LoRA adapters made after them, the smallest rests
    first (Llama 3.1 8B r32: two 1.75 MiB B of gate or up, or A of down, in each 4 MiB rest
    beside its 8 MiB q and o weights), then, where every block keeps its tensors, of those
    (:func:`largest_rest`: llama-7b's 4 MiB rests at 512 tokens, s·b·h·2 4 MiB). Under full
    checkpointing a block's tensors are freed in its forward, and the rests with them: the
    replay of llama-7b QLoRA 1 × 256 fully checkpointed has 57 of its 64 4 MiB rests free at
    its critical request. (0, "") where it does not apply."""
    from profiling.estimate.activations import dims_of
    from profiling.estimate.shape import shape_of
    from profiling.units import fmt_bytes

    kinds = weight_segments(cfg)
    if not kinds:
        return 0, ""
    d = dims_of(shape_of(cfg), cfg.seq_or_default(), cfg.batch)
    adapters = adapter_sizes(cfg, d) if d is not None else []
    every = d is not None and blocks_carved(cfg, d.L) == d.L
    kept = kept_sizes(cfg, d) if d is not None and every else []
    steps = [how for _, _, how in kinds]
    total = 0
    for i in sorted(range(len(kinds)), key=lambda i: kinds[i][0]):  # the smallest rests first
        rest, segments, _ = kinds[i]
        left = 0
        for _ in range(segments):
            one = _fill(rest, adapters)
            left += largest_rest(one, kept) if kept and one >= kept[0] else one
        if left < rest * segments:
            steps[i] += f", {fmt_bytes(rest * segments)} of rests carved to {fmt_bytes(left)}"
        total += left
    return total, "; ".join(steps)


def carved_bytes(cfg: TrainingConfig, d: Dims, blocks: int) -> int:
    """What can be carved out of freed weights at once, an upper bound: the kept tensors of the
    ``blocks`` blocks that keep them (``block_terms.per_layer`` and the adapters' ``per_layer``,
    as ``estimate.memory`` counts a block), under full checkpointing every block's input too,
    and two fp32 logits (the loss's, under a weight's size at few tokens)."""
    from profiling.estimate import block_terms
    from profiling.estimate import lora as lora_acts
    from profiling.estimate.activations import Bytes, checkpointed_layer

    e = Bytes.of(cfg.precision)
    terms = block_terms.per_layer(d, e, cfg)
    if cfg.lora_rank is not None:
        terms += lora_acts.per_layer(d, e, cfg)
    total = blocks * sum(int(t.bytes) for t in terms)
    if blocks < d.L:
        total += int(checkpointed_layer(d, e).bytes)
    return total + 2 * d.s * d.b * (d.V or 0) * 4


def pinned(rests: list[tuple[int, int, int]], budget: int) -> tuple[int, int]:
    """(bytes, segments): the most the rests can hold, each ``(segment, rest, count)`` kind of
    freed weight pinned with a rest of at most ``rest`` only once ``segment − rest`` of it is
    carved by live tensors, of which there are ``budget`` bytes: the kinds with the most rest
    per byte carved first, each whole segment's carving paid from the budget, the last one
    partly carved counted whole (the safe side)."""
    total = count = 0
    for seg, rest, n in sorted(rests, key=lambda r: r[1] / (r[0] - r[1]), reverse=True):
        if budget <= 0:
            break
        take = min(n, -(-budget // (seg - rest)))
        total, count, budget = total + take * rest, count + take, budget - take * (seg - rest)
    return total, count


def dequant_rests(cfg: TrainingConfig) -> tuple[int, str]:
    """(bytes, how): the rests every block's 4-bit linears leave, step by step, at most as many
    as the tensors the step keeps can carve (:func:`pinned`); (0, "") where it does not
    apply."""
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
    blocks = blocks_carved(cfg, d.L)
    per_block, steps, kinds = 0, [], []
    for numel, count in sorted(Counter(int(n) for n in numels).items()):
        weight = numel * c
        seg = segment_size(round_size(weight))
        rest = largest_rest(seg, kept) if weight > SMALL_SIZE else 0
        per_block += rest * count
        steps.append(f"{count} × {fmt_bytes(weight)} → {fmt_bytes(rest)}")
        if rest:
            kinds.append((seg, rest, count * blocks))
    which = ", the one recomputed going back" if blocks < d.L else "s"
    how = (f"each 4-bit linear's 16-bit weight, freed after its matmul, carved by the "
           f"activations the block keeps to a rest under the least of them, "
           f"{fmt_bytes(kept[0])}: {'; '.join(steps)}; {fmt_bytes(per_block)} a block × "
           f"{blocks} block{which}")  # fmt: skip
    total = per_block * blocks
    budget = carved_bytes(cfg, d, blocks)
    capped, segments = pinned(kinds, budget)
    if capped < total:  # too few kept bytes to carve every weight down to its rest
        how += (
            f"; but the {fmt_bytes(budget)} kept carve at most {segments} weights' "
            f"segments down to their rests: {fmt_bytes(capped)}"
        )
        total = capped
    return total, how


__all__ = [
    "NAME",
    "WEIGHTS",
    "adapter_sizes",
    "applies",
    "blocks_carved",
    "carved_bytes",
    "dequant_rests",
    "kept_sizes",
    "largest_rest",
    "pinned",
    "weight_rests",
    "weight_segments",
]
