"""FSDP2's backward of Llama's kind below its top block: the block above has gone back and
reduced, but its reduce-scatter input is still held. No torch here.

torch 2.13 ``_fsdp_param_group.py``: ``FSDPParamGroup.post_backward`` appends each block's
``foreach_reduce`` input (block·r, r the reduce dtype's bytes: fp32 under ``mixed``'s
MixedPrecisionPolicy(reduce_dtype=fp32), else the gradients') to
``comm_ctx.reduce_scatter_states`` and pops the oldest only at the next group's
``post_backward`` (``reduce_scatter_max_input_buffers`` 1), after that block's gradients are
made; ``pre_backward`` unshards a block (``wait_for_unshard`` →
``_fsdp_collectives.foreach_all_gather_copy_out``: the all-gather's output, block·g, beside the
unsharded parameters it fills, block·g) and then prefetches the block below. Two moments, beside
the sharded weights and optimizer states, the root gathered (root·g) with the LM head's and the
final norm's unsharded gradients ((V + 1)·h·g: reduced last, with the root's), block i + 1's
reduce-scatter input, the sharded gradients of the L − 1 − i blocks above, the gradient reaching
block i (s·b·h in the residual's dtype), RoPE's cos/sin, the step's inputs and the loss's
scalars:

- ``GATHER``, block i's copy-out (0 ≤ i ≤ L − 2): its all-gather output and parameters
  (2·block·g), the saved tensors of blocks 0..i (``block_terms.per_layer``);
- ``NORM``, block i's input RMSNorm going back (1 ≤ i ≤ L − 2): block i's parameters and block
  i − 1's prefetched all-gather output (2·block·g), block i's unsharded gradients (block·g), its
  input norm's backward at its peak (``norm_tapes``, which holds the norm weight's gradient and
  the norm's saved tensors) and the saved tensors of blocks 0..i − 1.

Each is linear in i, so an end of its range is the higher. A tiny Llama (h 256, f 512,
V 2,048, 16 tokens, FSDP 8, mixed) read 0.986 of the trace tied with 2 blocks (block 0's
copy-out the peak, the end of backward ``fsdp._tied_end`` leading the estimate), 0.915 with 4
(block 1's input norm), untied 0.92 / 0.87: equal to the byte now
(tests/profiling/trace/test_fsdp_block_gather.py). Full training only (LoRA's blocks reduce
their adapters' gradients alone, its head none).

Fully checkpointed, the same order holds (torch ``utils/checkpoint.py``'s non-reentrant
checkpoint reruns block i's forward when backward reaches it, after FSDP2's ``pre_backward``
has unsharded it and prefetched block i − 1), but a block below keeps only its checkpointed
input (s·b·h·r, and transformers' position ids: ``step_inputs.kept_position_ids``), the block
going back keeps its own to its end beside its recomputed tensors (``per_layer`` again, with
its SDPA seed and offset: ``step_scalars.recomputed_scalars``), and block 0's input norm may
lead (the blocks above hold more sharded gradients than the blocks below hold inputs). The
estimate had no moment for it and read 0.88-0.92 of the trace on wide toys (h 256, f 1024,
V 256), mixed FSDP 2, seq 64 (Llama 0.883 at block 0's input norm going back; GPT-2 0.919,
BLOOM 0.893, GPT-NeoX 0.886 late in block 0's backward): Llama's kind equal to the byte now
(fp32 and autocast: a bound, gate's 16-bit weight gradient beside its fp32 cast under autocast,
``GATE``); GPT-2's the bound above; GPT-NeoX's kind ``recomputed_bound``'s two moments
(tests/profiling/trace/test_fsdp_recomputed.py).

GPT-2's kind (LayerNorm, a GELU MLP, one fused c_attn) runs the same FSDP2 order and is counted
with the same moments, a bound: its LayerNorm's backward and its MLP's two f-wide gradients make
no more than the RMSNorm tapes and SwiGLU's three counted here. gpt2-l4 (h 64, f 160, V 512)
seq 32 SGD FSDP 4 read 0.951 of the trace (block 2's MLP going back, block 3's reduce-scatter
input held, block 1 prefetched: none of it counted), now 1.002-1.01. Its MLP's moment is GPT-2's
own: c_proj's bias gradient, the final LayerNorm's bias gradient, the position ids (no RoPE);
gpt2-l3 fp32 SGD FSDP 2 +3,296 B before, equal now.

Under autocast every block still saved holds the 16-bit copies of its gathered weights its
matmuls saved (``autocast_copies``; the estimate's once-per-model line), freed as each matmul
goes back; GPT-2's gelu_new goes back in fp32 (``gpt2_end.mlp_going_back``: three fp32 f-wide
gradients); Llama's up goes back with its 16-bit weight gradient and its fp32 cast beside it.
gpt2-l3 amp-bf16 SGD FSDP 2 read 0.981 of the trace (−40,992 B, block 1's gelu_new going back),
gpt2-l4 amp-fp16 FSDP 4 −13,048 B, a Llama toy (h 64, f 160, 3 blocks) amp-bf16 FSDP 2
−33,184 B (block 1's up going back): equal to the byte now.

GPT-NeoX's kind (GPT-NeoX, Phi, Falcon, BLOOM) runs the same order and takes ``GATHER`` alone
(its norms and MLP are not RMSNorm and SwiGLU): the final LayerNorm's bias beside its weight,
the rotated dims' cos/sin only (none under BLOOM's ALiBi), what ``neox.once_per_model`` keeps
to the end (Falcon's causal mask, BLOOM's embeddings' LayerNorm) and Falcon's two key/value
index tensors a block (``step_scalars.falcon_index``). It had no such moment and peaked at
"backward, last block": wide toys (h 256, f 1024, V 256) mixed FSDP 2 read 0.896-0.901 of the
trace, one block's 16-bit gathered weights below (tests/profiling/trace/test_fsdp_neox_gather.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.states import gathered_bytes
from profiling.estimate.step_inputs import kept_position_ids
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

GATHER = "backward, a lower block's gather (the block above's reduce-scatter input held)"
NORM = "backward, a middle block's input norm (the block above's reduce-scatter input held)"
POST = "backward, a middle block's second norm (the block above's reduce-scatter input held)"
MLP = "backward, a block's MLP going back (its SwiGLU's three gradients)"
RECOMPUTED = "backward, a recomputed block's attention going back (a bound)"
GATE = "backward, a block's gate going back under autocast (a bound)"
GELU = "backward, a recomputed block's GELU going back (a bound)"


def _norm_tape(d: Any, e: Any, cfg: TrainingConfig) -> int:
    """A block's input RMSNorm going back, at its peak: its saved tensors, its output's
    gradient, its fp32 temporaries and its weight's gradient (``norm_tapes``, as
    ``llama_end._norm`` runs the final norm's; CUDA's fused kernel makes fewer: a bound)."""
    from profiling.estimate.hf_ops import fp32_norm
    from profiling.estimate.norm_tapes import NormShape, backward_peak

    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    cast = bool(d.extra.get("hf_module")) and not fp32_norm(d)
    return int(backward_peak(NormShape(d.s * d.b, d.h, e.r, p, cast)).peak)


def _norms_back(
    d: Any, e: Any, cfg: TrainingConfig, sums: tuple[float, ...], terms: list[Any]
) -> list[tuple[str, float, str]]:
    """Block i's two norms going back (1 ≤ i ≤ L − 2; ``sums``: the moments' fixed part, what
    is held beside it, one block's sharded gradients, one block gathered, the blocks L): ``POST``,
    its MLP gone back (its three weights' gradients made, 3·h·f·g), its attention's and input
    norm's saved tensors and output alive (``per_layer``'s attention and half its norms' and
    matmul inputs'); ``NORM``, all of it gone back (block·g of gradients). Each beside that
    norm's backward at its peak (``norm_tapes``: it holds the norm weight's gradient)."""
    block_g, n = sums[3], int(sums[5])
    recomputed = not blocks_keep_saved(cfg)
    tape = _norm_tape(d, e, cfg)
    attn_copies, mlp_copies = autocast_copies(d, e, cfg)
    layer = _block_saved(d, e, cfg, terms)
    by = {term.name.split(" (", 1)[0]: float(term.bytes) for term in terms}
    norm_g = d.h * gathered_bytes(cfg) / cfg.tp  # the norm weight's gradient, in the tape
    with_tape = " and the norm's backward at its peak"
    # (name, the lowest and highest block it is counted at, what is alive of block i, made by
    # then, words)
    cases: list[tuple[str, int, int, float, float, str]] = []
    if n >= 3 or recomputed:  # without resharding the top block's too (all gathered still)
        top = n - 1 if cfg.zero == 2 else n - 2
        # recomputed, block 0's leads on 2 GPUs: the blocks above hold more sharded gradients
        # than the blocks below hold checkpointed inputs
        cases.append((NORM, 0 if recomputed else 1, top, 0.0, block_g - norm_g + tape,
                      "its unsharded gradients" + with_tape))  # fmt: skip
    if {"norms", "matmul inputs", "attention", "MLP"} <= set(by):  # transformers' Llama's terms
        alive = by["attention"] + (by["norms"] + by["matmul inputs"]) / 2 + attn_copies
        mlp = 3 * d.h * d.f * gathered_bytes(cfg) / cfg.tp
        cases.append((POST, 0, n - 2, alive, mlp + tape, "its attention's and input norm's "
                      "saved tensors and its MLP's weight gradients" + with_tape))  # fmt: skip
        if recomputed and e.amp and d.arch == "llama":
            # gate goes back last, its 16-bit weight gradient beside its fp32 cast (autocast's
            # weight cast going back, ``_to_copy``) and the MLP's other two fp32 ones: llama-wide
            # amp-bf16 FSDP 2 peaks there, 163,864 B above up's moment (``_mlp_back``). A bound:
            # the post-attention norm's backward stands for the MLP's input gradients
            gate = d.h * d.f * 2 / cfg.tp
            cases.append((GATE, 0, n - 2, alive, mlp + gate + tape, "its attention's and input "
                          "norm's saved tensors, its MLP's weight gradients and gate's 16-bit "
                          "one h·f·2" + with_tape))  # fmt: skip
    if "MLP" in by:  # down's (c_proj's) 16-bit weight copy freed as it went back
        down_copy = mlp_copies / (3 if d.arch == "llama" else 2)
        cases.append(_mlp_back(d, e, cfg, layer - down_copy, n))

    return _place(cfg, sums, cases)


def recomputed_bound(
    d: Any, e: Any, cfg: TrainingConfig, sums: tuple[float, ...], terms: list[Any]
) -> list[tuple[str, float, str]]:
    """GPT-NeoX's kind fully checkpointed (its norms and MLP are not RMSNorm and SwiGLU, and
    ``NORM``'s tapes are not theirs): block i going back, two bounds — its GELU going back
    (every recomputed tensor, ``per_layer``, beside its MLP's output weight's gradient and
    GELU's gradients), and its attention going back (all of its unsharded gradients, block·g,
    beside its recomputed tensors but the MLP's, as if none of the attention's were freed).
    The trace's peak lies in block 0's backward (its query_key_value's, or BLOOM's gelu's)."""
    if blocks_keep_saved(cfg):
        return []
    block_g, n = sums[3], int(sums[5])
    layer = _block_saved(d, e, cfg, terms)
    # the MLP's own terms (BLOOM's GeLUFunction's backward among them: it holds the output
    # weight's gradient already)
    mlp = sum(float(t.bytes) for t in terms if "MLP" in t.name or "GeLU" in t.name)
    gelu = any("GeLUFunction's backward" in t.name for t in terms)
    T, h, f, c = d.s * d.b, d.h, d.f, e.c
    out_w = 0.0 if gelu else (h * f + h) * gathered_bytes(cfg) / cfg.tp
    at_gelu = 0.0 if gelu else 2 * T * f * c / cfg.tp  # GELU's input's and output's gradients
    cases = [
        (GELU, 0, n - 1, layer, out_w + at_gelu,
         "its recomputed tensors, its MLP's output weight's gradient and GELU's two f-wide "
         "gradients (a bound)"),
        # the MLP gone back: its saved tensors and autocast's 16-bit copies of its weights freed
        (RECOMPUTED, 0, n - 1, layer - mlp - autocast_copies(d, e, cfg)[1], block_g,
         "its unsharded gradients beside its recomputed tensors but its MLP's (a bound)"),
    ]  # fmt: skip
    return _place(cfg, sums, cases)


def _place(
    cfg: TrainingConfig,
    sums: tuple[float, ...],
    cases: list[tuple[str, int, int, float, float, str]],
) -> list[tuple[str, float, str]]:
    """Each case (name, the lowest and highest block it is counted at, what is alive of block
    i, made by then, words) at its highest block i, beside the blocks above's sharded gradients
    and what the blocks below keep (``sums``: as ``_norms_back``'s)."""
    fixed, held, shard, block_g, block_r, L, kept = sums
    f, n = fmt_bytes, int(L)
    recomputed = not blocks_keep_saved(cfg)
    what_kept = "checkpointed inputs" if recomputed else "saved tensors"

    def edge(j: int) -> float:
        """What block j holds less than the middle's two blocks gathered and the reduce-scatter
        input above: block 0 has no block below to prefetch; the top block, no block above
        whose reduce-scatter input is held. Without resharding (--zero 2) nothing is gathered
        again in backward: blocks 0..j are still gathered, no all-gather output (j + 1 blocks,
        not 2)."""
        top = block_r if j == n - 1 else 0.0
        if cfg.zero == 2:
            return (1 - j) * block_g + top
        return (block_g if j == 0 else 0.0) + top

    out = []
    for name, lowest, highest, alive, made, words in cases:
        # linear in i between its edges: the ends, and the blocks next to the edges
        ends = {j for j in (lowest, 1, n - 2, highest) if lowest <= j <= highest}
        # recomputed, the block going back keeps its own checkpointed input to its end too
        own = 1 if recomputed else 0
        i = max(ends, key=lambda j: (n - 1 - j) * shard + (j + own) * kept - edge(j))
        below = (n - 1 - i) * shard + (i + own) * kept
        mine = alive + made - edge(i)
        lower = f"block {i - 1} prefetched" if i else "no block below: less one block gathered"
        if cfg.zero == 2:
            lower = f"blocks 0..{i} still gathered, none all-gathered again"
        upper = ", no reduce-scatter input above it" if i == n - 1 else ""
        calc = (
            f"{f(fixed)} as above (block {i}, {lower}{upper}) + {words} {f(mine)} + "
            f"{_blocks(n - 1 - i)} sharded gradients and {_blocks(i + own)} {what_kept} "
            f"{f(below)} + "
            f"{f(held)} held"
        )
        out.append((name, fixed + mine + below + held, calc))
    return out


def _mlp_back(
    d: Any, e: Any, cfg: TrainingConfig, layer: float, n: int
) -> tuple[str, int, int, float, float, str]:
    """Block i's SwiGLU going back, as ``llama_end._mlp`` counts the last block's: down has gone
    back (its saved input, the gated product s·b·f, freed; its weight's gradient h·f·g made),
    and the three f-wide gradients are alive at once (down's input gradient, then ``mul``'s two:
    SiLU's output's and up's), beside the rest of the block's saved tensors. Under fp32 on a
    few tokens this leads the second norm's moment (tiny tied Llama, 3 blocks, 128 tokens,
    FSDP 8: it read 0.9937 of the trace, −130,560 B, the peak at ``mul``'s backward in
    layers.1.mlp)."""
    T, h, f, c, t = d.s * d.b, d.h, d.f, e.c, cfg.tp
    down = h * f * gathered_bytes(cfg) / t
    made = down + (3 - 1) * T * f * c / t  # three gradients less the product freed
    words = (
        f"its saved tensors but down's input (and its weight's 16-bit copy), down's weight "
        f"gradient h·f·{gathered_bytes(cfg)} and the SwiGLU's three gradients s·b·3f·{c}"
    )
    if d.arch == "gpt2":  # c_proj's bias gradient too
        down += h * gathered_bytes(cfg) / t
        made += h * gathered_bytes(cfg) / t
    if d.arch == "llama" and e.amp:
        # later, up's weight gradient cast to fp32 beside its 16-bit one (autocast's weight
        # cast going back, ``_to_copy``: h·f·(2 + 4)), mul's saved factors and up's input copy
        # freed, SiLU's output gradient waiting and up's input gradient cast to fp32: llama-l3
        # (h 64, f 160) amp-bf16 SGD FSDP 2, 32 tokens: the peak, 4,096 B above mul's backward
        at_up = made + h * f * 4 / t - 4 * T * f * c / t + T * h * (4 - c) / t
        if at_up > made:
            made = at_up
            words = (
                f"its saved tensors but down's input, mul's factors, up's input copy and their "
                f"16-bit weight copies, down's weight gradient h·f·{gathered_bytes(cfg)}, up's "
                f"16-bit and fp32 weight gradients h·f·(2 + 4), SiLU's output's gradient "
                f"s·b·f·{c} and up's input's gradient s·b·h·4"
            )
    if d.arch == "gpt2" and e.amp:  # gelu_new fp32 from pow on (``gpt2_end.mlp_going_back``)
        made = down + 3 * T * f * 4 / t
        words = (
            f"its saved tensors but c_proj's 16-bit weight copy, c_proj's weight and bias "
            f"gradients (h·f + h)·{gathered_bytes(cfg)} and gelu_new's three fp32 gradients "
            f"s·b·3f·4"
        )
    return MLP, 0, n - 1, layer, made, words


def _block_saved(d: Any, e: Any, cfg: TrainingConfig, terms: list[Any]) -> float:
    """One block's saved tensors: ``per_layer``'s terms, autocast's 16-bit weight copies and
    its attention's SDPA seed and offset (``step_scalars.sdpa_rng``) and transformers' Falcon's
    key/value index tensors (``falcon_index``; all counted once per model elsewhere)."""
    from profiling.estimate.step_scalars import falcon_index, recomputed_scalars, sdpa_rng

    # a compiled block's partition saves its casts itself (its per_layer's terms)
    copies = 0.0 if cfg.compile else sum(autocast_copies(d, e, cfg))
    # fully checkpointed, the block recomputed saves them again (its own, the others' gone)
    scalars = sdpa_rng(d, cfg) + falcon_index(d, cfg) + recomputed_scalars(d, cfg)
    return float(sum(term.bytes for term in terms)) + copies + scalars


def autocast_copies(d: Any, e: Any, cfg: TrainingConfig) -> tuple[float, float]:
    """Under autocast one block's 16-bit weight copies its matmuls saved (autocast_mode.h
    ``cached_cast``: the gathered fp32 weight cast each forward), alive until each matmul goes
    back — its attention's (q, k, v, o; GPT-2's c_attn and c_proj) and its MLP's — which
    ``per_layer`` leaves to ``once_per_model``'s line (bytes on one rank: (attention, MLP))."""
    if not e.amp:
        return 0.0, 0.0
    q = d.a * d.hd
    mlp = (3 if d.arch == "llama" else 2) * d.h * d.f
    return 2 * (2 * d.h * q + 2 * d.h * d.k) / cfg.tp, 2 * mlp / cfg.tp


def block_gather(
    cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float], root: int, block: int
) -> list[tuple[str, float, str]]:
    """The moments (name, bytes, calculation), where modelled: FSDP2 reducing every
    micro-batch, full training of Llama's kind (GPT-2's: a bound; GPT-NeoX's: ``GATHER``
    alone, and fully checkpointed ``recomputed_bound``'s), eager, two blocks or more (the
    input norm's: three or more, or fully checkpointed)."""
    from profiling.estimate import activations as acts
    from profiling.estimate import eager_mask, neox
    from profiling.estimate.block_terms import per_layer

    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    L, V, psi = int(shape.get("layers") or 0), shape.get("vocab"), int(shape.get("params") or 0)
    if d is None or d.arch not in ("llama", "gpt2", "neox") or L < 2 or not V or not psi:
        return []
    if cfg.lora_rank is not None:
        return []
    # compiled blocks that keep their saved tensors: the gather moment alone, with what the
    # partition saves (block_terms.per_layer); the norms' and MLP's moments are eager ops'
    compiled, source = cfg.compile and blocks_keep_saved(cfg), cfg
    if cfg.compile and not compiled:  # fully checkpointed: the eager block's moments stand
        # for the compiled one's; without them the estimate kept the end of backward,
        # llama-wide mixed FSDP 2 0.883 of eager's trace
        cfg = cfg.model_copy(update={"compile": False})
    e = acts.Bytes.of(cfg.precision)
    g, t, f = gathered_bytes(cfg), cfg.tp, fmt_bytes
    r = 4 if cfg.precision == "mixed" else g
    layer = _block_saved(d, e, cfg, per_layer(d, e, cfg))
    # what a block below the one going back keeps: its saved tensors, or, fully checkpointed,
    # its input alone (torch/utils/checkpoint.py's non-reentrant _checkpoint_hook saves the
    # block's inputs; the block recomputes the rest going back, ``layer`` again)
    kept = layer if blocks_keep_saved(cfg) else d.s * d.b * d.h * e.r / t
    saved = "saved tensors" if blocks_keep_saved(cfg) else "checkpointed inputs"
    shard = parts["gradients"] * (1 - root / psi) / L  # one block's sharded gradients
    gpt2 = d.arch == "gpt2"  # a final LayerNorm (weight and bias); positions, not RoPE
    norm = 2 if d.arch in ("gpt2", "neox") else 1
    bias = V if d.extra.get("hf_module") == "phi" else 0  # Phi's LM head's (neox_moments)
    fixed = (
        parts["sharded weights"] + parts["optimizer"] + root * g / t + V * d.h * g / t
        + norm * d.h * g / t + bias * g / t + 2 * block * g / t + block * r / t
    )  # fmt: skip
    # GPT-2's position ids (int64, held by its forward's caller), or RoPE's cos/sin
    table = 8 * d.s if gpt2 else 2 * d.s * d.hd * e.rope
    if d.arch == "neox":  # the rotated dims' tables (ALiBi: none), and what its kind keeps
        # to the end: Falcon's causal mask, BLOOM's embeddings' LayerNorm
        table = 2 * d.s * int(d.extra["neox"]["rotary"]) * e.rope
        table += sum(term.bytes for term in neox.once_per_model(d, e, cfg))
    # transformers' position ids and eager attention's 4-D causal mask, which every fully
    # checkpointed block keeps as an input (step_inputs, eager_mask: one storage each)
    table += kept_position_ids(d, cfg) + sum(t.bytes for t in eager_mask.once_per_model(d, e, cfg))
    held = d.s * d.b * d.h * e.r / t + table + parts["inputs"]
    head_bias = f" + the head's bias V·{g} B" if bias else ""
    base = (
        f"sharded weights, optimizer, root·{g} B, the head's and final norm's unsharded "
        f"gradients (V + {norm})·h·{g} B{head_bias}, a block's all-gather output and parameters "
        f"2·block·{g} B and the reduce-scatter input of the block above block·{r} B {f(fixed)}"
    )
    tail = (
        f" + the gradient reaching it s·b·h·{e.r}, "
        + ("the position ids" if gpt2 else "RoPE's cos/sin")
        + f", the step's inputs and the loss {f(held)}"
    )
    # block i's copy-out, blocks above resharded and reduced: linear in i, so an end is highest
    i = max((0, L - 2), key=lambda j: (L - 1 - j) * shard + (j + 1) * kept)
    below = (L - 1 - i) * shard + (i + 1) * kept
    out = [(GATHER, fixed + below + held,
            f"{base} (block {i}) + {_blocks(L - 1 - i)} sharded gradients and "
            f"{_blocks(i + 1)} {saved} {f(below)}{tail}")]  # fmt: skip
    if cfg.zero == 2:  # without resharding no block is gathered again in backward
        out = []
    sums = (fixed, held, shard, block * g / t, block * r / t, L, kept)
    if compiled:  # block i's backward graph at its highest (its weights' gradients among
        # them), walked on the partitioner's graph (compiled_backward): the gather's moment
        # alone read 0.938-0.997 of the trace (llama-small mixed FSDP 4, 128 tokens: −294,912 B)
        return _compiled_back(cfg, out, i, (below, L * kept, block * r / t))
    if source.compile and out:  # fully checkpointed: the compiled block recomputed, walked
        # (falcon-40b-wide mixed FSDP 2, 32 tokens: 0.877 with the eager block's moments alone)
        out += _compiled_back(source, out, i, (below, L * kept, block * r / t), True)
    if d.arch == "neox":  # the other moments are RMSNorm's and SwiGLU's
        from profiling.estimate.fsdp_neox_top import top_mlp

        out += top_mlp(d, e, cfg, sums, layer)
        return out + recomputed_bound(d, e, cfg, sums, per_layer(d, e, cfg))
    out += _norms_back(d, e, cfg, sums, per_layer(d, e, cfg))
    return out


def _blocks(k: int) -> str:
    """``k`` blocks, possessive: "1 block's", "30 blocks'"."""
    return "1 block's" if k == 1 else f"{k} blocks'"


def _compiled_back(
    cfg: TrainingConfig,
    out: list[tuple[str, float, str]],
    i: int,
    sizes: tuple[float, float, float],
    recomputed: bool = False,
) -> list[tuple[str, float, str]]:
    """Compiled blocks under FSDP2: block ``i``'s gather moment with its backward graph at
    its highest less its weights' gradients (the block above's reduce-scatter input stands for
    them), and the last block's own: no block above, every block's saved tensors, its
    backward graph whole (its unsharded gradients made there) — the higher under autocast,
    whose fp32 gradients outweigh (llama-small amp-bf16 FSDP 2, 128 tokens: −166,400 B)."""
    from profiling.trace.compiled_estimate import block_grads, block_recomputed

    below, every, above = sizes
    walks, grads = block_recomputed(cfg), block_grads(cfg)
    j = 0 if i == 0 else 1
    # fully checkpointed: its forward graph again, then its backward graph (Recomputed.held)
    whole = [w.held - w.tangents if recomputed else w.backward for w in walks]
    more = whole[j] - grads[j]
    moments = [
        (RECOMPUTED_COMPILED if recomputed else name, value + more,
         f"{calc} + its graphs at their highest but its weights' gradients, walked on the "
         f"partitioner's graphs {fmt_bytes(more)}")
        for name, value, calc in out
    ]  # fmt: skip
    if not out:
        return moments
    value, calc = out[0][1], out[0][2]
    last = value - below - above + every + whole[1]
    return [*moments, (
        LAST_COMPILED + (", recomputed" if recomputed else ""),
        last,
        f"{calc.split(' (block')[0]} less the reduce-scatter input above {fmt_bytes(above)}, "
        f"every block's saved tensors {fmt_bytes(every)}, the gradient reaching it and the "
        f"step's inputs, and the last block's backward graph at its highest, its gradients "
        f"among them {fmt_bytes(whole[1])} = {fmt_bytes(last)}",
    )]  # fmt: skip


RECOMPUTED_COMPILED = "backward, a lower compiled block recomputed (the reduce-scatter above held)"
LAST_COMPILED = "backward, the last compiled block (its own gradients, no block above)"

__all__ = ["GATE", "GATHER", "GELU", "MLP", "NORM", "POST", "RECOMPUTED", "block_gather"]
