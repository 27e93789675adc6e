"""A pipeline stage under full activation checkpointing, in closed form: the moments the trace
shows that a block keeping everything has not.

- **Inside a wrapped block's forward** nothing is saved (the checkpoint runs it without a
  graph), but what torchtitan's block holds at once still counts: at the rotary embedding
  (``apply_rotary_emb``, ``profiling.plans.titan``) the normed input, q, k and v as ``wq wk
  wv`` made them, their fp32 copies (``.float()``), the complex64 products and their casts back
  are all alive (the caller's ``xq``, ``xk`` are replaced only when it returns); at SDPA the
  keys and values repeated to every head beside the output; in SwiGLU ``silu(w1 x)``, ``w3 x``
  and their product. The highest of these rides on every block input the stage keeps by then
  (the last wrapped block's moment). On a seq-8192 toy it is 12.5 hidden states where the
  closed form had 1 (``tests/profiling/plans/test_pipeline_checkpointing.py``).
- **A first backward at an earlier block**: every later block's gradients made (new tensors in
  a step's first backward) while a block frees only its kept input (``earlier_blocks``).
- **The last stage's blocks' backward** runs with the logits still alive (``PipelineStage``
  keeps the stage's output until the stage's backward is done) and the gradient the final norm
  hands the last block a temporary (on other stages it is the receive buffer).

No torch here.
"""

from __future__ import annotations

from collections.abc import Callable

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.float8_moments import wrapped_casts
from profiling.plans.fresh_grads import fresh_moment
from profiling.plans.layout import Stage
from profiling.plans.profile import Vec, vec
from profiling.plans.shapes import LOSS_SCALARS


def wrapped_forward(w: WorkloadConfig, tokens: int, t: int, c: int) -> int:
    """Bytes a wrapped block's forward holds at its highest above its input, on this rank's
    ``tokens`` (the whole sequence's for the attention under tensor parallelism, 1/t of the
    heads; the residual stream sequence-parallel)."""
    q, kv = w.heads * w.head_dim // t, max(w.n_kv_heads // t, 1) * w.head_dim
    # the attention's input: gathered under tensor parallelism, beside the norm's own output
    # (no rstd: without a graph the fused norm keeps none)
    normed = tokens * w.hidden * c + (tokens // t * w.hidden * c if t > 1 else 0)
    # .float() copies a 16-bit tensor (not an fp32 one), the complex64 product is 4 bytes per
    # real element, type_as copies back to the 16-bit dtype
    up, down = (0, 0) if c == 4 else (4, c)
    rotary = ((q + kv) * (c + up + 4 + down) + kv * c) * tokens  # with v
    # repeat_kv copies the keys and values to every local head (a view for one head, none
    # when there is nothing to repeat)
    repeated = 2 * q if w.heads > w.n_kv_heads and w.n_kv_heads // t > 1 else 0
    sdpa = (q + 2 * kv + repeated + q) * c * tokens
    # the residual, silu(w1 x), w3 x and their product
    x, half = tokens // t * w.hidden * c, (w.ffn // t) * c * tokens
    mlp = x + 3 * half
    # under tensor parallelism w2's partial output over the whole sequence, its reduce-scatter's
    # input (DTensor's copy) and output beside the residual and the product (PP 2 x TP 4: the
    # forward 0.835 of the trace's)
    w2 = 2 * x + half + 2 * tokens * w.hidden * c if t > 1 else 0
    return normed + max(rotary, sdpa, mlp, w2)


def forward_moment(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, kept: list[int], sizes: tuple[int, ...]
) -> Vec:
    """A pipeline stage's forward inside its last wrapped block under full checkpointing: what
    the blocks before it keep and its own input (the stage's first input is its receive buffer,
    ``buffers``) beside ``wrapped_forward``; nothing under other checkpointing or compiled
    (the partitioner's graph is not the eager block)."""
    tokens, t, c = sizes
    if cfg.checkpointing != "full" or cfg.compile or not stage.layers:
        return vec()
    only = stage.checkpointed(cfg.checkpoint_every) or [True] * stage.layers
    last = max(i for i, wrapped in enumerate(only) if wrapped) if any(only) else -1
    if last < 0:
        return vec()
    x = tokens // t * w.hidden * c
    held = sum(kept[: last + 1]) - (0 if stage.embedding else x)
    # under Float8 a Linear's casts beside what the block holds at its call (float8_moments)
    inside = max(wrapped_forward(w, tokens, t, c), wrapped_casts(cfg, w, tokens, c))
    return vec(activations=held, temporaries=inside)


def head_freed(stage: Stage, head_acts: int, logits: int, grad: int) -> Vec | None:
    """What the last stage's blocks' backward has above its start beyond the blocks' own: the
    head's saved tensors freed but its ``logits`` (the stage's output) and the loss (the
    schedule keeps it) beside ``autograd.backward``'s fp32 seed gradient (``_make_grads``'
    ``ones_like``, held until the call returns), and the gradient of the last block's output a
    temporary; None on another stage."""
    if not stage.head:
        return None
    return vec(activations=logits - head_acts + 8, temporaries=grad)


def earlier_blocks(
    cfg: TrainingConfig, stage: Stage, sizes: tuple[int, int, list[int], int], peak: Vec,
    moment: Callable[[int, int, int], Vec],
) -> Vec:  # fmt: skip
    """The first backward of a stage of several blocks, at its highest: ``peak`` (its last
    block's) or at an earlier block, ``q`` blocks before the last, where ``q`` blocks'
    gradients are made (``sizes``: a block's gradients, its kept input, what each block keeps,
    what the last recomputes) — ``moment(freed, made, more)``, ``more`` temporaries. Wrapped,
    each block's kept input freed but the first one's (whose backward hands the next a gradient
    as large, a temporary; on the last stage the final norm's gradient is one already). Not
    checkpointed, everything a block saved freed with its backward and the gradient it hands
    down a temporary (the top block's came in a receive buffer; on the last stage it replaces the
    final norm's): the trace's live storages on an interleaved fp32 stage of 2 blocks, hidden
    256, 128 tokens: one block's 2,951,168 B of gradients beside the next block's backward,
    588,784 B above the last block's moment. Highest at the stage's first block when a
    block's gradients outweigh what it frees, else one block before the last."""
    grads, x, kept, recompute = sizes
    saved = kept[0] if kept else 0
    if cfg.compile or stage.layers < 2 or cfg.checkpointing not in ("full", "none"):
        return peak
    only = stage.checkpointed(cfg.checkpoint_every) if cfg.checkpointing == "full" else None
    if only is not None and not only[0]:
        # every N-th block wrapped, the first not: its backward after every later block's
        # (their kept tensors freed, their gradients made) beside only the gradient the next
        # block hands it — under Float8 at w1's casts, the last stage's first backward 745,456 B
        # above the last block's (hidden 256, FFN 704, 128 tokens)
        grad_in = x if recompute else 0
        first = moment(recompute + sum(kept[1:]), (stage.layers - 1) * grads,
                       (0 if stage.head else x) - grad_in)  # fmt: skip
        return first if first["total"] > peak["total"] else peak
    if cfg.checkpointing == "none":
        q = stage.layers - 1 if grads > saved else 1
        earlier = moment(q * saved, q * grads, 0 if stage.head else x)
        return earlier if earlier["total"] > peak["total"] else peak
    if stage.checkpointed(cfg.checkpoint_every) is not None:
        return peak  # every N-th block wrapped: closed_form._every_n's moments
    q = stage.layers - 1 if grads > x else 1
    earlier = moment((q - (0 if stage.head else 1)) * x, q * grads, 0)
    return earlier if earlier["total"] > peak["total"] else peak


def fresh_w2(
    cfg: TrainingConfig, w: WorkloadConfig, t: int, gathered: int, half: int, recompute: int,
    plain: int = 0,
) -> tuple[int, Vec | None]:  # fmt: skip
    """What a pipeline stage's later backward holds beyond its block's gradient buffers as
    ``w2``'s gradient is made anew, before it is added into the accumulated one: the whole
    gradient under FSDP (in the gathered dtype; with ``recompute``, as before), else what it
    outweighs the buffer it replaces in that moment (``half``: the SwiGLU product's gradient
    is alive beside it, the product's inputs' gradients not yet made), e.g. a short microbatch
    under a wide block (0.993 of the trace on the middle stages before); and under FSDP's own
    reduce dtype ``fresh_grads.fresh_moment`` (``plain``: what a block saves unwrapped)."""
    fresh = (w.ffn // t) * w.hidden * gathered
    if cfg.fsdp:  # with or without recomputation (PP 2 x FSDP 2 without: rank 0 0.994 before)
        return fresh, fresh_moment(cfg, w, t, gathered, half, plain)
    return max(fresh - half, 0), None


def lowest_block(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, dims: tuple[int, int, int],
    grads: tuple[int, int], held: tuple[list[int], int, int, bool], peak: Vec,
) -> Vec:  # fmt: skip
    """Every block checkpointed, no FSDP, no pipeline: the lowest block's backward (block 0,
    the last to run) as its recomputed ``w2``'s backward is done, above the backward's start
    (the head's saved tensors freed): the higher of it and ``peak``, the backward's highest so
    far.

    A block keeps only its input, so each backward frees one input (``x``) and makes a block's
    gradients: where a block's gradients outweigh its input (fp32 toys: 172,544 B against
    65,536 B) the last block's moment is the highest, not the first's. Alive then: the head's
    gradients (output and final norm) and every later block's, ``w2``'s weight gradient, block
    0's recomputed tensors but ``w2``'s input (its backward freed it), its input still kept,
    the loss's scalars (``LOSS_SCALARS``: the loop holds them); the gradient of ``w2``'s input
    and the two SwiGLU products' gradients (three FFN-wide buffers), the gradient of the
    block's output and the residual sum's. Read in the trace's live tensors (MemTracker's
    _WINFO) at the peak, llama-untied-l3 DDP 2 fp32 seq 128: aten.mul.Tensor in
    layers.0.feed_forward, torch 2.13 torch/utils/checkpoint.py recomputing the block."""
    (tokens, t, c), (grad_b, block_grads) = dims, grads
    kept, recompute, head_acts, every_n = held
    # FSDP: fsdp_moments; every N-th: earlier_blocks; the per-op policy keeps more than the
    # input, and compile's and Float8's blocks recompute otherwise (not read: left as they were)
    plain = cfg.checkpointing == "full" and not (cfg.compile or cfg.float8)
    if cfg.fsdp or not recompute or every_n or not plain:
        return peak
    h, half, x = w.hidden, (w.ffn // t) * c * tokens, tokens // t * w.hidden * c
    head = (w.vocab // t * h + h) * grad_b if stage.head else 0
    made = (w.ffn // t) * h * grad_b
    low = vec(
        gradients=head + (stage.layers - 1) * block_grads + made,
        activations=recompute - half - sum(kept[1:]) - head_acts + LOSS_SCALARS,
        temporaries=3 * half + 2 * x,
    )  # fmt: skip
    return low if low["total"] > peak["total"] else peak


__all__ = [
    "earlier_blocks", "forward_moment", "fresh_w2", "head_freed", "lowest_block",
    "wrapped_forward",
]  # fmt: skip
