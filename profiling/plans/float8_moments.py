"""Float8 inside a pipeline stage's blocks, in closed form: the moments where torchao's casts
sit beside more than ``profiling.plans.float8_form`` counts (a Float8Linear's casts above its
own input, weight and gradient), as the trace's op-by-op totals show on the wide toy (hidden
256, FFN 704, 128 tokens a microbatch, torchao 0.18, torch 2.13):

- **A wrapped block's forward** (full checkpointing, nothing saved): each Linear casts beside
  what the block's code holds at its call (``profiling.plans.titan``): ``wq`` the normed input;
  ``wk`` also q; ``wv`` also k; ``wo`` q, k, v, the repeated keys and values and SDPA's output;
  ``w1`` the residual sum and the FFN's normed input; ``w3`` also ``silu(w1 x)``; ``w2`` the two
  and the SwiGLU product (``w1 x``, ``w3 x`` and ``silu`` freed as the expression goes). At
  ``w2``'s weight cast: 2,023,432 B above the block's input where the closed form had 1,712,128
  (245,768 B below the trace per forward).
- **The recomputation** in a checkpointed block's backward runs each Linear's forward casts
  beside every tensor it has saved so far: at ``w2``, all of them (the later backward 57,344 B
  below the trace before).
- **``w3``'s and ``w1``'s backward**: each casts its weight (9 B an element) beside its output's
  gradient; by ``w1``'s, the SwiGLU's four tensors are freed, ``w3``'s input gradient waits to be
  added and (in a step's first backward) ``w3``'s weight gradient is made — above ``w2``'s casts
  where the FFN's weights outweigh a block's saved tensors (the last stage's first backward
  1,237,008 B below the trace before, at its first block).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.float8_form import (
    backward_transient,
    cast_scales,
    forward_casts,
    linear_backward,
)
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, vec
from profiling.plans.ring_form import fused
from profiling.plans.shapes import stage_tensors


def _larger(a: Vec, b: Vec) -> Vec:
    return a if a["total"] >= b["total"] else b


def wrapped_casts(cfg: TrainingConfig, w: WorkloadConfig, tokens: int, c: int) -> int:
    """A wrapped block's forward at a Linear's casts, at its highest above the block's input
    (see the module); 0 without Float8; under torchao's Float8 TP styles (tensorwise beside
    TP) :func:`_styles_wrapped_casts`. Under torch's TP styles (rowwise beside TP) each
    Linear casts its whole-sequence input on the rank's heads and FFN width, the norm's
    sequence-sharded output still held beside its all-gathered copy and the residual
    sequence-sharded: rowwise PP 2 × TP 2 × FSDP 2, full checkpointing (hidden 256, FFN 704,
    128 tokens), at ``w2``'s weight cast 188,416 B above the closed form before (the first
    stage's later forward), read in the trace's live storages."""
    t = cfg.tp
    if not cfg.float8:
        return 0
    if t > 1 and cfg.float8 == "tensorwise":
        return _styles_wrapped_casts(cfg, w, tokens, c)
    h, f = w.hidden, w.ffn // t
    q, kv = w.heads * w.head_dim // t, w.n_kv_heads * w.head_dim // t
    res = tokens // t * h * c  # the residual stream (sequence-parallel under TP)
    n = tokens * h * c + (res if t > 1 else 0)  # the normed input (gathered beside its shard)
    half = tokens * f * c
    # repeat_kv copies the keys and values (a view when nothing is repeated); the math kernel's
    # output is copied by .contiguous() (closed_form.block_activations)
    repeated = 2 * q if w.heads > w.n_kv_heads and w.n_kv_heads // t > 1 else 0
    copy = 0 if fused(w.head_dim, c) else q
    beside = (
        (n, h, q), (n + q * c * tokens, h, kv), (n + (q + kv) * c * tokens, h, kv),
        (n + (q + 2 * kv + repeated + q + copy) * c * tokens, q, h),
        (res + n, h, f), (res + n + half, h, f), (res + n + half, f, h),
    )  # fmt: skip
    gathered = cfg.float8_all_gather and cfg.fsdp
    recipe = cfg.float8
    return max(held + forward_casts(tokens, i, o, recipe, gathered) for held, i, o in beside)


def _styles_wrapped_casts(cfg: TrainingConfig, w: WorkloadConfig, tokens: int, c: int) -> int:
    """:func:`wrapped_casts` under torchao's Float8 TP styles (tensorwise beside TP; torchao
    0.18 float8/float8_tensor_parallel.py): ``PrepareFloat8ModuleInput`` gathers the norms'
    outputs in fp8 (one byte an element, beside the sequence-sharded 16-bit output), so
    ``wq``/``wk``/``wv``/``w1``/``w3`` cast only their weight; ``Float8RowwiseParallel`` casts
    ``wo``'s and ``w2``'s input as it enters (8 B an element above the 16-bit input its module
    call holds, then the fp8 copy and its scale beside the weight's cast). PP 2 × TP 2 ×
    FSDP 2, full checkpointing (hidden 256, FFN 704, 128 tokens): at ``w2``'s weight cast
    the first stage's later forward 110,600 B below the trace before, read in its live
    storages."""
    t = cfg.tp
    h, f = w.hidden, w.ffn // t
    q, kv = w.heads * w.head_dim // t, w.n_kv_heads * w.head_dim // t
    res = tokens // t * h * c  # the residual stream, sequence-parallel
    n = tokens * h + 4 + res  # the norm's fp8 gathered output (its scale) beside its shard
    gathered = cfg.float8_all_gather and cfg.fsdp

    def weight(i: int, o: int) -> int:  # one weight's cast and its scale
        return 0 if gathered else 9 * i * o + 4

    repeated = 2 * q if w.heads > w.n_kv_heads and w.n_kv_heads // t > 1 else 0
    copy = 0 if fused(w.head_dim, c) else q
    held_o = n + (q + 2 * kv + repeated + q + copy) * c * tokens  # at wo's call
    held_2 = res + n + tokens * f * c  # at w2's call: the SwiGLU product in 16 bits
    return max(
        n + weight(h, q), n + q * c * tokens + weight(h, kv),
        n + (q + kv) * c * tokens + weight(h, kv),
        held_o + 8 * q * tokens, held_o + q * tokens + 4 + weight(q, h),
        res + n + weight(h, f), res + n + tokens * f * c + weight(h, f),
        held_2 + 8 * f * tokens, held_2 + f * tokens + 4 + weight(f, h),
    )  # fmt: skip


def float8_offsets(
    cfg: TrainingConfig, w: WorkloadConfig, sizes: tuple[int, int, int], grad_b: int
) -> tuple[Vec, ...]:
    """Above a block's backward start (``pipelined_backward``'s: the stage's gradients made,
    ``w2``'s included, the block's recomputed tensors, its output's gradient): the first and a
    later backward at the recomputation's casts, then at ``w3``'s or ``w1``'s (see the module);
    nothing without Float8. Under torchao's Float8 TP styles (tensorwise beside TP) the
    recomputation's casts are ``float8_form.recompute_cast``'s, not here, and ``w3``'s and
    ``w1``'s casts sit beside their output gradient in fp8 only: PP 2 × TP 2 × FSDP 2 (hidden
    256, FFN 704, 128 tokens) the first stage's later backward 122,876 B below the trace
    before, read in its live storages. ``sizes``: tokens, t, the compute dtype's bytes."""
    tokens, t, c = sizes
    if not cfg.float8:
        return ()
    h, f = w.hidden, w.ffn // t
    gathered = cfg.float8_all_gather and cfg.fsdp
    recipe = cfg.float8
    styles = t > 1 and recipe == "tensorwise"  # torchao's Float8 TP styles
    fwd_first, fwd_later = vec(), vec()
    if cfg.checkpointing == "full" and not styles:  # every Linear's forward again, w2's last
        casts = max(forward_casts(tokens, i, o, recipe, gathered) for i, o in ((h, f), (f, h)))
        # w2's gradient is not made yet
        fwd_first = vec(gradients=-f * h * grad_b, activations=casts)
        fwd_later = vec(activations=casts)
    half, weight = tokens * f * c, h * f
    scales = cast_scales(tokens, h, f, recipe, gathered)
    lb = linear_backward(tokens * h, weight, tokens * f, gathered, recipe, scales)
    # under FSDP's own reduce dtype (mixed) a weight's fresh gradient (in the compute dtype)
    # waits for the group's post-backward: a later backward holds w2's and w3's, the first one
    # makes w3's 16-bit (in bf16 AccumulateGrad adds each in at once, fresh_grads: counted,
    # rowwise bf16 PP 2 × TP 2 × FSDP 2's stage 0 would stand 102,016 B over)
    fresh = weight * c if cfg.fsdp and cfg.precision == "mixed" else 0
    # under torchao's Float8 TP styles w2 keeps the SwiGLU product in fp8 (tp_styles_kept), and
    # Float8ColwiseParallel casts w1's and w3's output gradient to fp8 before their backward
    # (torchao 0.18 float8/float8_tensor_parallel.py: _prepare_output_fn's
    # NoopFwToFloat8BwDynamic), its bf16 one freed then: no bf16 output gradient beside the casts
    product, own = (tokens * f + 4, 0) if styles else (half, half)  # with its fp32 scale
    # w3's: silu(w1 x)'s gradient waits beside w3's output's, w1 x still saved by silu
    w3 = vec(activations=-2 * half - product, temporaries=half + own + lb + fresh)
    # w1's: every SwiGLU tensor freed, w3's input gradient waiting, w3's weight gradient made
    w1 = vec(activations=-3 * half - product, temporaries=own + tokens * h * c + lb + 2 * fresh)
    # under FSDP's own reduce dtype w2's gradient, counted in it as made, is still the
    # compute dtype's .grad until the block's post_backward
    w2_held = -weight * (grad_b - c) if cfg.fsdp else 0
    w1_first = vec(gradients=weight * (c if cfg.fsdp else grad_b) + w2_held,
                   activations=w1["activations"],
                   temporaries=w1["temporaries"] - 2 * fresh)  # fmt: skip
    w3_first = vec(gradients=w2_held, activations=w3["activations"],
                   temporaries=w3["temporaries"] - fresh)  # fmt: skip
    return fwd_first, fwd_later, _larger(w3_first, w1_first), _larger(w3, w1)


def unsharded_ffn_casts(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, sizes: tuple[int, int, int],
    blocks: tuple[list[int], list[int]], held: tuple[int, int, int],
) -> Vec:  # fmt: skip
    """A plan without FSDP and without a pipeline (its blocks' moments are otherwise the
    ring's, ``ring_form.plan_ring_peaks``, or ``closed_form``'s buffers alone): a block's
    ``w3`` and ``w1`` backward casts, above the backward's start, at the block where they are
    highest (the last to run, block 0, holds every later block's gradients; every block where
    the blocks differ). As :func:`float8_offsets` has them (torchao 0.18's
    ``matmul_with_hp_or_float8_args.backward``: the output gradient's cast, then the weight's,
    9 B an element, beside it): at ``w3``'s, ``silu(w1 x)``'s gradient waits beside ``w3``'s
    output's and ``w2``'s weight gradient is made; at ``w1``'s, the SwiGLU's tensors are
    freed, ``w3``'s input gradient waits and ``w3``'s weight gradient is made — beside the
    gradient of the block's output, the head's and every later block's gradients (the gathered
    dtype: nothing reduces them before the step) and the earlier blocks' saved tensors. Read in
    the trace's live storages (CP 2, mixed, tensorwise; h 128, f 512, V 128, 2 blocks, 64
    tokens a rank): at block 0's ``w1`` weight cast 82,984 B above the closed form before,
    whose moments had no Float8 cast beside the gradients made. ``sizes``: tokens, t, the
    compute dtype's bytes; ``blocks``: what each block keeps and recomputes; ``held``: the
    head's saved tensors freed by then (the loss's scalars stay: the loop holds them), a
    block's gradients, the gradients' bytes an element. Nothing under FSDP
    (``fsdp_moments.block_moments``) or without Float8."""
    tokens, t, c = sizes
    (kept, rec), (head_acts, block_grads, grad_b) = blocks, held
    if not cfg.float8 or cfg.fsdp or not kept:
        return vec()
    head = stage_tensors(w, stage, 0, t)[-2:] if stage.head else []
    head_grads = sum(d * r for d, r in head) * grad_b  # the final norm's and the output's
    h, f = w.hidden, w.ffn // t
    gathered = cfg.float8_all_gather and cfg.fsdp
    recipe = cfg.float8
    styles = t > 1 and recipe == "tensorwise"  # torchao's Float8 TP styles (float8_offsets)
    half, weight, x = tokens * f * c, h * f, tokens // t * h * c
    scales = cast_scales(tokens, h, f, recipe, gathered)
    lb = linear_backward(tokens * h, weight, tokens * f, gathered, recipe, scales)
    f8_b = backward_transient(w, tokens, t, gathered, recipe, c)
    product, own = (tokens * f + 4, 0) if styles else (half, half)
    L = len(kept)
    ends = {0, 1, L - 2, L - 1} & set(range(L)) if len(set(kept)) == len(set(rec)) == 1 else \
        set(range(L))  # fmt: skip
    best = vec()
    for i in sorted(ends):
        after = L - 1 - i  # blocks whose backward is done
        # checkpointed, the block keeps what it saved (its input; under the per-op policy the
        # listed ops' outputs) and its recomputation beside it, and one gradient of its input
        # more (closed_form._backward_extra's grad_in)
        grad_in = x if rec[i] else 0
        base = -head_acts - sum(kept[i + 1 :]) + rec[i]
        made = head_grads + after * block_grads + weight * grad_b  # w2's made too
        # w2's casts (backward_transient: its input's gradient among them), nothing of the
        # block's freed yet, w2's weight gradient not made
        w2 = vec(gradients=made - weight * grad_b, activations=base,
                 temporaries=x + grad_in + f8_b)  # fmt: skip
        w3 = vec(gradients=made, activations=base - 2 * half - product,
                 temporaries=x + grad_in + half + own + lb)  # fmt: skip
        w1 = vec(gradients=made + weight * grad_b, activations=base - 3 * half - product,
                 temporaries=x + grad_in + own + tokens * h * c + lb)  # fmt: skip
        best = _larger(best, _larger(w2, _larger(w3, w1)))
    return best


__all__ = ["float8_offsets", "unsharded_ffn_casts", "wrapped_casts"]
