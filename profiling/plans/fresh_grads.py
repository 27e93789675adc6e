"""A later microbatch's backward under FSDP2 with a reduce dtype of its own, in closed form: the
moments where the block's fresh weight gradients, kept as ``.grad`` until the group's
``post_backward`` adds them into the fp32 accumulator, lead the stage
(``fresh_moment``, the larger, which ``checkpoint_form.fresh_w2`` hands to
``pipelined_backward``).

Under ``mixed`` (16-bit parameters, fp32 reduction) autograd sets each weight's gradient as
the unsharded parameter's ``.grad`` (the last microbatch's was moved into
``unsharded_accumulated_grad`` and set to None), and only the group's ``post_backward`` adds it
in (torch 2.13 torch/distributed/fsdp/_fully_shard/_fsdp_param.py
``accumulate_unsharded_grad_if_needed``, _fsdp_param_group.py ``post_backward``). In fp32 or
bf16 the reduce dtype is the parameters': ``AccumulateGrad`` adds each into ``.grad`` as it is
made, and neither moment exists. Both read in the trace's live storages in order (WIDE: hidden
256, FFN 704, a 4,096-word vocabulary, mixed).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.profile import Vec, vec


def _applies(cfg: TrainingConfig) -> bool:
    return cfg.fsdp and cfg.precision == "mixed"


def fresh_moment(
    cfg: TrainingConfig, w: WorkloadConfig, t: int, gathered: int, half: int, plain: int
) -> Vec | None:
    """The larger of :func:`fresh_ffn` and :func:`fresh_block`; None where neither applies."""
    ffn, block = fresh_ffn(cfg, w, t, gathered, half), fresh_block(cfg, w, t, gathered, half, plain)
    found = [m for m in (ffn, block) if m is not None]
    return max(found, key=lambda m: m["total"], default=None)


def fresh_ffn(
    cfg: TrainingConfig, w: WorkloadConfig, t: int, gathered: int, half: int
) -> Vec | None:
    """As ``w1``'s ``mm`` makes its input's gradient: ``w2``'s, ``w3``'s and ``w1``'s
    gradients alive beside ``w1``'s output gradient (``silu_backward``'s, ``half``) and
    ``w3``'s input gradient (the whole sequence, the hidden size wide), the four FFN-wide
    tensors the block saved freed — above ``fresh_w2``'s moment where the rank's FFN width is
    short of the hidden size: PP 2 × TP 2 × FSDP 2-4 on 128 tokens a microbatch, stage 0's later
    backward 40,960 B below the trace before (rank 0's peak). Relative to the backward's
    start, before its input gradient and any recomputation; None where it does not apply."""
    if not _applies(cfg):
        return None
    width = w.ffn // t
    hidden = half // width * w.hidden  # tokens x hidden in the compute dtype: half's tokens
    return vec(activations=-4 * half, temporaries=3 * width * w.hidden * gathered + half
               + 2 * hidden)  # fmt: skip


def fresh_block(
    cfg: TrainingConfig, w: WorkloadConfig, t: int, gathered: int, half: int, plain: int
) -> Vec | None:
    """As ``wq``'s ``mm`` makes its input's gradient, the block's last: every weight gradient
    of the block but its attention norm's alive (in the gathered dtype), beside the gradient
    of the residual between attention and FFN (sequence-sharded), ``wq``'s output gradient
    (cast back from RoPE's fp32), the sum of ``wk``'s and ``wv``'s input gradients and
    ``wq``'s (the whole sequence), everything the block saved (``plain``) freed but the
    attention norm's input and rstd and its output gathered (``wq``, ``wk`` and ``wv`` read
    it). Above :func:`fresh_ffn` where the microbatch is short beside the weights: PP 4 × TP 2
    × FSDP 2 on 32 tokens a microbatch, the middle and last stages' later backward 141,480 and
    146,396 B below the trace before (ranks 1-3 at 0.986-0.991). Relative as
    :func:`fresh_ffn`; None without a block moment to follow (:func:`_follows`)."""
    if not _applies(cfg) or not _follows(cfg):
        return None
    tokens = half // (w.ffn // t) // gathered
    return _block_end(w, (tokens, t, gathered), gathered, plain)


def first_block_end(
    cfg: TrainingConfig, w: WorkloadConfig, sizes: tuple[int, int, int], gathered: int,
    plain: int,
) -> Vec | None:  # fmt: skip
    """A step's first backward at :func:`fresh_block`'s moment, in every precision: the first
    microbatch's weight gradients are the ones the step keeps (``AccumulateGrad`` takes a
    gradient made where ``.grad`` is None as it is, torch 2.13
    torch/csrc/autograd/functions/accumulate_grad.h ``accumulateGrad``; FSDP2 leaves it the
    unsharded parameter's ``.grad`` until the group's ``post_backward``), so all the block's
    but its attention norm's are alive beside ``wq``'s input gradient — above the block's
    ``w2`` moment where a short microbatch meets wide weights, and at a stage's lowest block
    beside every gradient above it: fp32 PP 4 × TP 2 × FSDP 2 (WIDE, 32 tokens a microbatch)
    the non-first stages' first backward 828,080 B below the trace before, bf16 PP 2 × TP 2 ×
    FSDP 2 413,864 B (read in the trace's live storages in order). Relative as
    :func:`fresh_ffn` (the block's gradients in full: ``w2``'s, which the caller counts made,
    included); None where :func:`_follows` does not, or under ZBV (its input backward makes no
    weight gradient). ``sizes``: tokens, t, the compute dtype's bytes."""
    if not _follows(cfg) or cfg.pp_schedule == "zbv":
        return None
    return _block_end(w, sizes, gathered, plain)


def _follows(cfg: TrainingConfig) -> bool:
    """Whether the block's backward is the eager one the block moments follow: not under
    per-op checkpointing, compiled, Float8, context parallel or Ulysses (theirs differ)."""
    if cfg.compile or cfg.float8 or cfg.cp > 1 or cfg.ulysses > 1:
        return False
    return cfg.checkpointing in ("none", "full")


def _block_end(w: WorkloadConfig, sizes: tuple[int, int, int], gathered: int, plain: int) -> Vec:
    """:func:`fresh_block`'s moment above the block's backward start (see there)."""
    tokens, t, c = sizes
    h = w.hidden
    q, kv = w.heads * w.head_dim // t, w.n_kv_heads * w.head_dim // t
    weights = (2 * q * h + 2 * kv * h + 3 * (w.ffn // t) * h + h) * gathered
    x = tokens // t * h * c
    held = tokens // t * (h * c + 4) + tokens * h * c
    temps = weights + x + tokens * q * c + 2 * tokens * h * c
    return vec(activations=held - plain, temporaries=temps)


__all__ = ["first_block_end", "fresh_block", "fresh_ffn", "fresh_moment"]
