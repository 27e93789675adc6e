"""Full training of Llama's kind of block (our blocks, transformers' Llama, as LitGPT's modules
too) recomputed in backward under ``--checkpointing full``, eager: what is alive while a
block's MLP goes back.

The earlier bound — the end of forward and one block's kept tensors (``estimate.recomputed``)
— misses the gradients made by then and the MLP's backward: with a vocabulary small next to
the blocks (V 128; h 128, f 512, 256 × 2 tokens) it read 0.856–0.896 of the trace (our blocks
and transformers', bf16, fp32, autocast). Read from the trace's live storages at its peak, the
highest point of a recomputed block's backward is at the SwiGLU's ``mul`` going back, beside:

- the model's states and inputs, the end of forward's once-per-model tensors (RoPE's cos/sin,
  transformers' position ids) and the checkpoints of this block and those below: the loss's
  log-probabilities and labels and the final norm's tensors are freed by then
  (``llama_end.released``);
- the gradients made by then: the head's and the final norm's, and every block's above;
- the gradient reaching the block (s·b·h in the residual's dtype);
- the block's kept tensors, recomputed (``recompute``: the estimate's count of one block), less
  its first norm's input where that is the checkpoint itself (a fused norm, or transformers'
  ``to(float32)`` of a residual already fp32: no new storage), less down's input, freed as
  down's backward ends;
- down's weight gradient (h·f) and the SwiGLU's three f-wide gradients at once (down's input
  gradient, then ``mul``'s two), in the matmuls' dtype;
- under autocast, the 16-bit copies of the block's weights the recomputation casts again, less
  down's, freed with down's backward, and less the head's (kept from the end of forward), freed
  with the head's.

The recomputed block's kept tensors (``recompute``) hold its SDPA seed and offset too
(``step_scalars.recomputed_scalars``: 24 B flash, 16 B memory-efficient; only that block's, the
others' discarded with their checkpoints). Equal to the trace at the first and the last block,
whichever is higher (tests/profiling/estimate/test_recomputed_llama.py). No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.ranks import one_gpu_step
from profiling.estimate.recomputed import LITGPT_LLAMA, checkpoints, end_of_forward, total
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a recomputed block's MLP gradients"


def modelled(inp: TrainingConfig, d: Dims) -> bool:
    """Full training of eager, fully checkpointed Llama-kind blocks (ours on CUDA, or
    transformers' Llama, Mistral) on one GPU after any loss (``llama_end.released`` reads the
    estimate's own logits lines: Liger's and CCE's gradients made in forward, a chunked loss's
    log-probabilities): no fp32 gradient copies, no optimizer in backward. With the
    gradients kept (``--grads-kept``) every gradient is alive from the start, and each new one is
    made beside it before autograd's ``AccumulateGrad`` adds it in place (``moment``)."""
    module = d.extra.get("hf_module")
    return (
        d.arch == "llama"
        and d.V is not None
        and set(d.extra) <= LITGPT_LLAMA
        and module in (None, "llama", "mistral")
        and (module is not None or getattr(inp, "target", "cuda") == "cuda")
        and inp.lora_rank is None
        and inp.checkpointing == "full"
        and not inp.compile
        and not inp.fp32_grads
        and not inp.optimizer_in_bwd
        and not inp.deepspeed
        and one_gpu_step(inp)
        and inp.tp == 1
        and not inp.sharded
    )


def _first_norm_input(d: Dims, e: Bytes) -> int:
    """The first norm's saved input where it is the block's checkpoint (no new storage): our
    fused norm always; transformers' ``to(float32)`` only where the residual is fp32 already."""
    if d.extra.get("hf_module") and e.r == 2:
        return 0
    return d.s * d.b * d.h * e.r


def moment(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], d: Dims, inputs: float,
    recompute: float,
) -> tuple[str, float, str]:  # fmt: skip
    """The moment (name, bytes, calculation) at the last and the first block, the higher.
    ``inputs``: what the step holds of its inputs throughout."""
    from profiling.estimate.compiled_backward import loss_scalars
    from profiling.estimate.llama_end import released

    e = Bytes.of(inp.precision)
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    p = 4 if inp.precision in ("fp32", "amp-bf16", "amp-fp16") else 2

    # another stack's loss (Liger's, CCE's, the chunked ones): its tape ends without nll_loss's
    # two fp32 scalars, which the loop holds through backward all the same
    fwd = end_of_forward(lines, inputs) + loss_scalars(lines)
    gone = released(d, e, inp, lines)
    ckpt = checkpoints(lines)
    # torchtune's activation offloading: two inputs brought back whichever block (as
    # ``recomputed.by_block`` counts them; the trace cannot run it)
    offloaded = any("brought back" in ln.name for ln in lines)
    each = 0.0 if offloaded else ckpt / d.L
    g_blk = float(shape.get("block_params") or 0) * p
    first = (V * h + h) * p  # the head's and the final norm's
    # --grads-kept: every gradient alive since the last step (zero_grad(set_to_none=False)) in
    # place of those made by then; the block's new ones (down's weight gradient) are made
    # beside their .grad before ``AccumulateGrad`` adds them in place (torch/csrc/autograd/
    # functions/accumulate_grad.h: ``variable_grad += new_grad``)
    kept_grads = total(lines, "gradients") if inp.grads_kept else 0.0
    if inp.grads_kept:
        first, g_blk = 0, 0.0
    # (LitGPT's modules: its fp32 copies of the RoPE tables beside transformers' the checkpoints
    # keep are the end of forward's, ``litgpt_qkv.tables`` under full checkpointing)
    reach = T * h * e.r
    kept = recompute - _first_norm_input(d, e) - T * f * e.c
    mlp = h * f * p + 3 * T * f * e.c
    copies = 0.0
    if e.amp:  # autocast's cache, filled again by the recomputation; down's freed by now,
        # and the head's (the end of forward's) with the head's backward
        copies = 2.0 * (float(shape.get("block_params") or 0) - 2 * h - h * f - V * h)
    best: tuple[float, str] = (0.0, "")
    for i in sorted({d.L - 1, 0}, reverse=True):
        fewer = (d.L - 1 - i) * each
        above = (d.L - 1 - i) * g_blk
        value = fwd - gone - fewer + first + above + kept_grads + reach + kept + mlp + copies
        calc = (
            f"block {i + 1} of {d.L}: end of forward {fmt_bytes(fwd)} − the loss's and the "
            f"final norm's tensors {fmt_bytes(gone)}"
            + (f" − the checkpoints above {fmt_bytes(fewer)}" if fewer else "")
            + (f" + every gradient, kept {fmt_bytes(kept_grads)}" if kept_grads
               else f" + the head's and final norm's gradients {fmt_bytes(first)}")
            + (f" + the gradients of the blocks above {fmt_bytes(above)}" if above else "")
            + f" + the gradient reaching it s·b·h·{e.r} {fmt_bytes(reach)} + its kept tensors "
            f"recomputed, less down's input (freed) and the checkpoint its norm keeps "
            f"{fmt_bytes(kept)} + down's weight gradient and the SwiGLU's three gradients "
            f"h·f·{p} + s·b·3f·{e.c} {fmt_bytes(mlp)}"
            + (f" + autocast's 16-bit copies of its weights but down's, less the head's "
               f"{fmt_bytes(copies)}" if copies else "")
            + f" = {fmt_bytes(value)}"
        )  # fmt: skip
        if value > best[0]:
            best = (value, calc)
    return NAME, best[0], best[1]


__all__ = ["NAME", "modelled", "moment"]
