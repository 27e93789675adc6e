"""A GPT-NeoX-kind decoder (GPT-NeoX/Pythia, Falcon, Phi, BLOOM) or a Llama with an untied head,
trained whole: the embedding going back, the step's last backward op. Every other parameter's
gradient is made by then and the optimizer's state of the last step is alive; ``embedding_backward``
(torch's derivatives.yaml, ``embedding_dense_backward``) makes the dense V·h gradient while the
gradient reaching the embedding's output (s·b·h in the residual's dtype: the first block's two
norms' input gradients summed with the residual's, transformers' ``GPTNeoXLayer.forward`` /
``FalconDecoderLayer.forward``) is still alive, and the loop holds the loss's scalars
(``step_scalars.LOSS``; LitGPT's loop its logits too, ``losses.held_over``). Read in order from the
trace's live storages: the embedding's gradient made, then the gradient reaching it freed, then the
loss's scalars.

transformers' LlamaDecoderLayer.forward sums its input norm's and the residual's gradients the
same way: llama-untied-l3 (V 512, h 64) amp-fp16 8-bit Adam 16 × 1 read the optimizer step,
−4,104 B (s·b·h·4 + 8) below the trace; now equal (bitsandbytes' 8-bit step makes nothing
beyond what the moment holds).

Where the optimizer's step makes no temporaries (SGD) and the activations are few (full
checkpointing, short sequences), this is the step's peak: gpt_neox-base (V 512, h 64) fp32 seq
32, eager attention, full checkpointing, SGD read the optimizer step, −8,200 B (s·b·h·4 + 8)
below the trace; now equal.

Not here: LoRA (the embedding is frozen: no gradient reaches it), a tied head (its gradient
waits for the embedding's and the two are summed: ``step_moments``' end of backward), kept
gradients (the new gradient added in place to the kept one), optimizer steps in backward,
sharding, tensor parallelism (DDP's ranks run the one-GPU step: ``estimate.ranks``). No torch
here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.ranks import one_gpu_step
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the embedding"
ARCHS = ("neox", "llama")  # a Llama's first block sums its norm's and residual's gradients too


def moments(
    d: Dims | None, cfg: TrainingConfig, held: float, tied: bool, scalars: float
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``held``: the weights, gradients, optimizer
    state and the step's inputs, as the optimizer step counts them; ``scalars``: what the loop
    holds of the loss to backward's end (its scalars, LitGPT's logits)."""
    if d is None or d.V is None or d.arch not in ARCHS or tied or cfg.lora_rank is not None:
        return []
    if cfg.grads_kept or cfg.optimizer_in_bwd or cfg.tp != 1 or not one_gpu_step(cfg):
        return []
    e = Bytes.of(cfg.precision)
    reach = d.s * d.b * d.h * e.r
    value = held + reach + scalars
    calc = (
        f"weights, gradients, optimizer and inputs {fmt_bytes(held)} + the gradient reaching "
        f"the embedding s·b·h·{e.r} {fmt_bytes(reach)}"
        + (f" + what the loop holds of the loss {fmt_bytes(scalars)}" if scalars else "")
        + f" = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
