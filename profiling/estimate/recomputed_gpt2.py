"""Full training of transformers' GPT-2 recomputed in backward under ``--checkpointing full``,
eager: what is alive while a recomputed block's MLP goes back, as ``estimate.recomputed_llama``
counts Llama's kind and ``estimate.recomputed_neox`` bounds GPT-NeoX's.

GPT-2 had no such moment: the estimate's earlier bound — the end of forward and one block's
kept tensors (``estimate.recomputed``) — misses the gradients made by then and the MLP's
backward. With a vocabulary small next to the blocks (V 128; h 128, f 512, 64 × 2 tokens) and
an optimizer whose step is small (8-bit Adam, SGD) it read 0.775-0.82 of the trace (−1,442,336 B
under amp-fp16); with AdamW the optimizer step's moment hid it. Read from the trace's live
storages at its peak (the first block's ``gelu_new`` going back), at block i (0-based, of L;
the highest at the last or the first):

- the end of forward, less the loss's log-probabilities and labels and the final LayerNorm's
  tensors (``neox_moments.released``) and the checkpoints of the blocks above (each s·b·h in
  the residual's dtype);
- the gradients made by then: the head's (tied: the embedding's) and the final LayerNorm's,
  every block's above, and the block's own ``mlp.c_proj``'s (weight and bias: its backward
  ran first). The position embedding's is made last (``wpe`` goes back after the blocks);
- the block's kept tensors, recomputed (``recompute``, the estimate's count of one block), less
  ``ln_1``'s saved input: it is the block's checkpoint itself (transformers 5.24
  ``modeling_gpt2.py`` ``GPT2Block.forward``: ``self.ln_1(hidden_states)`` on the block's input,
  the residual's dtype, LayerNorm in fp32 under autocast: no new storage);
- the MLP going back as ``estimate.gpt2_end`` counts the last block's (the gradient reaching the
  block and ``gelu_new``'s f-wide gradients, c_proj's saved input freed; under ``--dropout``
  ``resid_pdrop``'s mask after c_proj freed too);
- under autocast, the 16-bit copies of the block's four Conv1D weights the recomputation casts
  again (``torch.utils.checkpoint``'s recomputation runs under its own ``torch.autocast``:
  ``addmm`` saves the weight's copy; the biases' copies die with the autocast cache as the
  recomputation's autocast exits) — c_proj's freed with its backward, as ``gpt2_end`` counts —
  and c_proj's 16-bit input (the product's cast, in ``recompute``) freed: the gradient's 16-bit
  cast that ``gpt2_end`` sets against it is not made yet at this height.

Equal to the trace to the byte on the toys (tests/profiling/estimate/test_recomputed_gpt2.py).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.ranks import one_gpu_step
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a recomputed block's MLP gradients"


def modelled(inp: TrainingConfig, d: Dims) -> bool:
    """Full training of transformers' GPT-2, fully checkpointed, eager, on one GPU under
    PyTorch's loss: no kept or fp32 gradient copies, CUDA's autocast lists where autocast; the
    optimizer stepped after backward or in it (``estimate.recomputed_gpt2_in_bwd``)."""
    from profiling.estimate.losses import REFERENCE

    return (
        d.arch == "gpt2"
        and d.V is not None
        and d.extra.get("hf_module") == "gpt2"
        and inp.lora_rank is None
        and inp.loss == REFERENCE
        and inp.checkpointing == "full"
        and not (Bytes.of(inp.precision).amp and not _cuda(inp))
        and not inp.compile
        and not inp.grads_kept
        and not inp.fp32_grads
        and not inp.activation_offload
        and not inp.deepspeed
        and one_gpu_step(inp)
        and inp.tp == 1
        and not inp.sharded
    )


class Terms(NamedTuple):
    """What a recomputed block holds as its MLP goes back, whichever way the optimizer steps:
    the loss's and final norm's tensors freed (``gone``), the block's kept tensors less its
    checkpoint (``kept``), the MLP's gradients (``mlp``), autocast's weight copies
    (``copies``), the MLP's dropout mask freed (``mask``), and ``words`` for each."""

    gone: float
    kept: float
    mlp: float
    copies: float
    mask: float
    what: str
    words: list[str]


def block_terms(inp: TrainingConfig, d: Dims, recompute: float) -> Terms:
    """The terms every recomputed GPT-2 block holds going back (see the module)."""
    from profiling.estimate.gpt2_end import mlp_going_back
    from profiling.estimate.neox_moments import released

    e = Bytes.of(inp.precision)
    tokens = d.s * d.b
    gone, what = released(d, e, inp)
    kept = recompute - tokens * d.h * e.r  # ln_1's input: the block's checkpoint
    mlp, mlp_words = mlp_going_back(d, e, inp)
    # resid_pdrop's mask after c_proj (in ``recompute``), freed by its backward (as gpt2_end)
    mask = tokens * d.h * (1 if _cuda(inp) else e.r) if inp.dropout else 0
    copies, copy_words = 0.0, ""
    if e.amp:
        # c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj cast again (4h² + 2hf), less the product's
        # 16-bit cast c_proj saved (freed by its backward)
        copies = (4 * d.h * d.h + 2 * d.h * d.f - tokens * d.f) * e.c
        copy_words = (
            f" + the recomputation's 16-bit copies of its Conv1D weights (4h² + 2h·f)·{e.c} − "
            f"c_proj's 16-bit input s·b·f·{e.c} (freed) {fmt_bytes(copies)}"
        )
    words = [
        f"+ its kept tensors recomputed, less ln_1's input (the checkpoint) {fmt_bytes(kept)}",
        f"+ {mlp_words} {fmt_bytes(mlp)}{copy_words}",
    ] + ([f"− the MLP's dropout mask {fmt_bytes(mask)}"] if mask else [])
    return Terms(gone, kept, mlp, copies, mask, what, words)


def moment(
    inp: TrainingConfig, d: Dims, fwd: float, each: float, block_params: float, recompute: float
) -> tuple[str, float, str]:
    """The moment (name, bytes, calculation) at the last and the first block, the higher:
    ``fwd`` the end of forward (with what the step holds of its inputs), ``each`` one block's
    checkpoint, ``block_params`` one block's parameters."""
    t = block_terms(inp, d, recompute)
    g = 4 if inp.precision in ("fp32", "amp-bf16", "amp-fp16") else 2  # the gradients' bytes
    g_blk = block_params * g
    first = (int(d.V or 0) * d.h + 2 * d.h) * g  # the head's (tied: the embedding's), ln_f's
    down = (d.h * d.f + d.h) * g  # c_proj's weight and bias
    # the terms named as the calculation shows them, each block's own two first
    shared = [
        f"+ the head's and final norm's gradients (V·h + 2h)·{g} {fmt_bytes(first)}",
        f"+ c_proj's gradients (h·f + h)·{g} {fmt_bytes(down)}",
        *t.words,
    ]
    best: tuple[float, str] = (0.0, "")
    for i in sorted({d.L - 1, 0}, reverse=True):
        n_above = d.L - 1 - i
        value = (
            fwd - t.gone - n_above * (each - g_blk) + first + down + t.kept + t.mlp + t.copies
            - t.mask
        )  # fmt: skip
        own = [
            f"block {i + 1} of {d.L}: end of forward {fmt_bytes(fwd)} − {t.what} "
            f"{fmt_bytes(t.gone)}"
        ]
        if n_above:
            own += [
                f"− the checkpoints above {fmt_bytes(n_above * each)}",
                f"+ the gradients of the blocks above {fmt_bytes(n_above * g_blk)}",
            ]
        if value > best[0]:
            best = (value, " ".join([*own, *shared, f"= {fmt_bytes(value)}"]))
    return NAME, best[0], best[1]


__all__ = ["NAME", "Terms", "block_terms", "modelled", "moment"]
