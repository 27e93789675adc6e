"""Exact extrapolation of a trace from 3, 4 and 5 identical blocks to L blocks.

Why it is exact. A reference model is an embedding, L identical blocks run one after another,
and a head. Every byte count the trace reports is a sum of per-tensor sizes, and with identical
blocks each quantity is affine:

- model states, gradients, optimizer states, and anything sampled at a phase boundary: one
  block's worth per block, so ``a + b·L``;
- the highest total inside block *i*'s forward (or backward): the states (``a + b·L``), plus
  what the blocks before it (after it, in backward) left alive — one block's worth each, so
  ``c·i`` — plus the block's own transient, the same for every block: ``A + B·L + C·i``.
  The first and the last block border the embedding and the head, so they are fitted apart
  (``a + b·L`` each); the stretches before the first block and after the last are too.

So: trace 3 and 4 blocks to fit every coefficient (the middle blocks' three from block 1 of 3
and blocks 1, 2 of 4), then trace 5 blocks and require every prediction to hold to the byte —
if one does not, the caller traces the full model instead. A phase's peak is the highest of its
stretches at L blocks (over *i*, a middle block's ``C·i`` is highest at an end: i = 1 or
L − 2), taking the earliest stretch on a tie, as a running maximum keeps the first moment it
reaches. ``tests/profiling/trace/test_trace_block_scaling.py`` proves the result equal to the
full trace.

Pure Python: numbers only, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Vec = dict[str, int]
SAMPLE_BLOCKS = (3, 4, 5)


class NotAffine(Exception):
    """A quantity that did not scale as identical blocks must: trace the full model."""


def split_block(name: str, prefix: str) -> tuple[str, int | None]:
    """('Llama.layers.{}.q_proj', 3) for 'Llama.layers.3.q_proj'; (name, None) elsewhere."""
    head, sep, rest = name.partition(prefix)
    if not sep:
        return name, None
    index, dot, tail = rest.partition(".")
    if not index.isdigit():
        return name, None
    return f"{head}{prefix}{{}}{dot}{tail}", int(index)


def _affine(v1: Mapping[str, int], v2: Mapping[str, int], steps: int) -> Vec:
    return {k: v1.get(k, 0) + steps * (v2.get(k, 0) - v1.get(k, 0)) for k in {*v1, *v2}}


def _middle(
    base: Mapping[str, int],
    along_n: Mapping[str, int],
    along_i: Mapping[str, int],
    dn: int,
    di: int,
) -> Vec:
    """A + B·n + C·i relative to block 1 of the first sample: ``dn`` more blocks, ``di`` later."""
    moved = _affine(base, along_n, dn)
    return {
        k: moved.get(k, 0) + di * (along_i.get(k, 0) - along_n.get(k, 0))
        for k in {*moved, *along_i}
    }


def _same(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    return all(a.get(k, 0) == b.get(k, 0) for k in {*a, *b})


class _Samples:
    """The three samples, keyed by (template, block index or None)."""

    def __init__(self, samples: Mapping[int, Mapping[str, Mapping[str, int]]], prefix: str):
        self.split = {
            n: {split_block(name, prefix): vec for name, vec in samples[n].items()}
            for n in SAMPLE_BLOCKS
        }
        self.templates = {t for t, _ in self.split[SAMPLE_BLOCKS[0]]}
        if any({t for t, _ in self.split[n]} != self.templates for n in SAMPLE_BLOCKS):
            raise NotAffine("the traces of 3, 4 and 5 blocks name different quantities")

    def at(self, n: int, t: str, i: int | None) -> Mapping[str, int]:
        try:
            return self.split[n][(t, i)]
        except KeyError:
            raise NotAffine(f"{t.format(i)} is missing from the {n}-block trace") from None

    def line(self, t: str, i_at: Callable[[int], int | None]) -> tuple[Vec, Vec]:
        """A quantity affine in n (a + b·n), checked on the third sample: (value at n1, at n2)."""
        n1, n2, n3 = SAMPLE_BLOCKS
        v1, v2 = self.at(n1, t, i_at(n1)), self.at(n2, t, i_at(n2))
        if not _same(_affine(v1, v2, n3 - n1), self.at(n3, t, i_at(n3))):
            raise NotAffine(t)
        return dict(v1), dict(v2)


def _blocks_of(s: _Samples, t: str, blocks: int) -> dict[str, Vec]:
    """Every block's value at ``blocks`` blocks for one per-block quantity."""
    n1, n2, n3 = SAMPLE_BLOCKS
    first = s.line(t, lambda n: 0)  # a + b·n
    last = s.line(t, lambda n: n - 1)  # a + b·n
    # middle blocks: A + B·n + C·i, from (3, 1), (4, 1), (4, 2); checked on 5 blocks
    base, along_n = s.at(n1, t, 1), s.at(n2, t, 1)
    along_i = _affine(along_n, s.at(n2, t, 2), 1)
    for i in range(1, n3 - 1):
        if not _same(_middle(base, along_n, along_i, n3 - n1, i - 1), s.at(n3, t, i)):
            raise NotAffine(t.format(i))
    out = {}
    for i in range(blocks):
        if i in (0, blocks - 1):
            out[t.format(i)] = _affine(*(first if i == 0 else last), blocks - n1)
        else:
            out[t.format(i)] = _middle(base, along_n, along_i, blocks - n1, i - 1)
    return out


def extrapolate(
    samples: Mapping[int, Mapping[str, Mapping[str, int]]], blocks: int, prefix: str
) -> dict[str, Vec]:
    """Every named quantity at ``blocks`` blocks, from samples at 3, 4 and 5 blocks.

    ``samples[n][name]`` is a vector of integers (categories, or a module's numbers); names
    that contain ``prefix`` + an index belong to that block. Raises :class:`NotAffine` when a
    prediction for the 5-block sample misses by a single byte.
    """
    s = _Samples(samples, prefix)
    out: dict[str, Vec] = {}
    for t in sorted(s.templates):
        if "{}" in t:
            out.update(_blocks_of(s, t, blocks))
        else:
            out[t] = _affine(*s.line(t, lambda n: None), blocks - SAMPLE_BLOCKS[0])
    return out


def stretch_order(label: str, names: list[str], prefix: str, backward: bool) -> list[str]:
    """The stretches of one phase in the order they run (blocks reversed in backward)."""
    head = f"{label}|"
    blocks = sorted((split_block(n, prefix)[1], n) for n in names if n.startswith(head + prefix))
    ordered = [n for _, n in (reversed(blocks) if backward else blocks)]
    before = [n for n in (head + "start", head + "before") if n in names]
    after = [n for n in (head + "after",) if n in names]
    return before + ordered + after


def phase_peak(segments: Mapping[str, Vec], label: str, prefix: str, backward: bool) -> Vec:
    """The highest total of one phase's stretches (the earliest on a tie)."""
    best: Vec | None = None
    for name in stretch_order(label, list(segments), prefix, backward):
        if best is None or best.get("Total", 0) < segments[name].get("Total", 0):
            best = dict(segments[name])
    if best is None:
        raise NotAffine(f"no stretch recorded for {label}")
    return best


# ---------------------------------------------------------------- transformers' modules

# transformers' blocks are identical too, but the tracker's per-block stretches of backward are
# not (memory freed late is attributed to the block that runs then), so per-block values are
# not extrapolated for them: every quantity the trace reports whole — each phase's peak and
# its categories, the state after each phase, the model-level module rows, FLOPs — is affine
# in the layer count as long as each phase's highest moment stays where it is (identical blocks
# add the same bytes each): fitted from 1 and 2 layers and checked on 3; where one layer is
# special (it is both the first and the last: a tied embedding's backward, OLMo 2's forward
# peak inside it), fitted from 2 and 3 and checked on 4. What the check cannot see: a phase
# whose highest moment moves (its start overtaken by its end) beyond the checked count.
LAYER_SAMPLES = ((1, 2, 3), (2, 3, 4))


def extrapolate_layers(
    samples: Mapping[int, Mapping[str, Mapping[str, int]]],
    blocks: int,
    prefix: str,
    counts: tuple[int, int, int] = LAYER_SAMPLES[0],
) -> dict[str, Vec]:
    """Every named quantity at ``blocks`` layers from samples at ``counts`` layers (fitted on
    the first two, checked on the third).

    Names that belong to one block (``prefix`` + an index) are left out: the caller keeps them
    out of what it reports. Raises :class:`NotAffine` when the check misses by a byte, or the
    samples name different quantities.
    """
    n1, n2, n3 = counts
    if n2 != n1 + 1:  # _affine steps by (v2 - v1) per layer
        raise ValueError(f"layer samples {counts}: the first two must be consecutive")
    named = [{k for k in samples[n] if split_block(k, prefix)[1] is None} for n in counts]
    if named[0] != named[1] or named[0] != named[2]:
        raise NotAffine(f"the traces of {counts} layers name different quantities")
    out: dict[str, Vec] = {}
    for name in sorted(named[0]):
        v1, v2 = samples[n1][name], samples[n2][name]
        if not _same(_affine(v1, v2, n3 - n1), samples[n3][name]):
            raise NotAffine(name)
        out[name] = _affine(v1, v2, blocks - n1)
    if (moved := _lowest_overtakes(out, prefix)) is not None:
        raise NotAffine(moved)
    return out


STEADY_LABEL = "steady-state step"  # profiling.trace.raw.STEADY: the module rows' step


def _lowest_overtakes(out: Mapping[str, Mapping[str, int]], prefix: str) -> str | None:
    """A backward's peak from its lowest block on (``profiling.trace.lowest_block``), fitted,
    above a fitted peak that holds it — the phase's, or the module rows' around the blocks:
    the moment that led the samples is overtaken before ``blocks`` layers (a line through them
    reads low there), so none of those lines holds."""
    modules = [k for k in out if k.startswith("module|") and prefix.startswith(k[7:] + ".")]
    for name, low in out.items():
        label, sep, _ = name.removeprefix("segment|").partition("/backward|lowest")
        if not sep or not name.startswith("segment|"):
            continue
        fitted = {f"peak|{label}|backward": out[f"peak|{label}|backward"].get("Total", 0)}
        if label == STEADY_LABEL:
            fitted.update({m: out[m].get("peak_backward", 0) for m in modules})
        for what, peak in fitted.items():
            if low.get("Total", 0) > peak:
                return f"{what}: overtaken past the samples by {name} ({low.get('Total', 0)} B)"
    return None
